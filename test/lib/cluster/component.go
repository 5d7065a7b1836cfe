package cluster

import (
	"os"
	"path/filepath"
)

// Component is a process that runs beside the control plane for a test, such as a job operator.
// It gets the same care as the control plane's own processes: a process group of its own,
// SIGKILL from the kernel if the test binary dies, and its output in WorkDir/<name>.log
// (appended to, so a component started twice keeps both runs' output).
type Component struct{ p *process }

// StartComponent runs BinDir/binary with args under the name given (which names its log), in
// WorkDir. It does not wait for anything: readiness is the caller's to judge.
func (c *Cluster) StartComponent(name, binary string, args ...string) (*Component, error) {
	if err := os.MkdirAll(c.WorkDir, 0o755); err != nil {
		return nil, err
	}
	p, err := startProcess(name, filepath.Join(c.BinDir, binary), args, c.WorkDir)
	if err != nil {
		return nil, err
	}
	c.logf("cluster: started %s (pid %d)", name, p.pid())
	return &Component{p: p}, nil
}

// Pid is the component's process id.
func (m *Component) Pid() int { return m.p.pid() }

// Exited says whether the process has ended; ExitErr then says how.
func (m *Component) Exited() bool { return m.p.exited() }

// ExitErr describes how the process ended; it blocks until it has.
func (m *Component) ExitErr() error { return m.p.exitErr() }

// LogPath is the file the component's output goes to.
func (m *Component) LogPath() string { return m.p.logPath }

// Tail returns the last n lines of the component's log.
func (m *Component) Tail(n int) string { return m.p.tail(n) }

// Stop sends SIGTERM to the component's process group, then SIGKILL after StopTimeout, and
// waits for it to be reaped. Safe to call more than once.
func (m *Component) Stop() { m.p.stop(StopTimeout) }
