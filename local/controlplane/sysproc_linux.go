package controlplane

import "syscall"

// sysProcAttr puts a child in a process group of its own (so that Stop can
// signal it and anything it spawns, and a terminal's Ctrl-C reaches only the
// caller) and, unless detach is set, asks the kernel to kill it when the
// caller dies, so a crashed test leaves nothing running.
func sysProcAttr(detach bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if !detach {
		a.Pdeathsig = syscall.SIGKILL
	}
	return a
}
