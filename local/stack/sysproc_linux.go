package stack

import "syscall"

// sysProcAttr puts a child in its own process group and, unless detach is
// set, has the kernel kill it when the stack's process dies.
func sysProcAttr(detach bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if !detach {
		a.Pdeathsig = syscall.SIGKILL
	}
	return a
}
