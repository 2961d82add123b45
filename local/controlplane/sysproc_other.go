//go:build unix && !linux

package controlplane

import "syscall"

// sysProcAttr puts a child in a process group of its own. There is no
// parent-death signal outside Linux, so detach makes no difference here.
func sysProcAttr(detach bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
