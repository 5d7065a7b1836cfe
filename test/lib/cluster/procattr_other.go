//go:build unix && !linux

package cluster

import (
	"errors"
	"syscall"
)

// sysProcAttr puts the child in a process group of its own. Only Linux offers Pdeathsig here,
// so elsewhere a crashed test run can leave the components running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func newUTSNamespace() (*syscall.SysProcAttr, error) {
	return nil, errors.New("cluster: a hostname of its own for a process needs Linux")
}
