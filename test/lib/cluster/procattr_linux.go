package cluster

import "syscall"

// sysProcAttr puts the child in a process group of its own and has the kernel SIGKILL it when
// the test binary (strictly: the OS thread that started it) dies, so a crashed run leaks nothing.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
