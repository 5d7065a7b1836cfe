package cluster

import "syscall"

// sysProcAttr puts the child in a process group of its own and has the kernel SIGKILL it when
// the test binary (strictly: the OS thread that started it) dies, so a crashed run leaks nothing.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// newUTSNamespace is sysProcAttr with a hostname of the process's own.
func newUTSNamespace() (*syscall.SysProcAttr, error) {
	attr := sysProcAttr()
	attr.Cloneflags = syscall.CLONE_NEWUTS
	return attr, nil
}
