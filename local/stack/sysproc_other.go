//go:build !linux

package stack

import "syscall"

// sysProcAttr puts a child in its own process group.
func sysProcAttr(bool) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
