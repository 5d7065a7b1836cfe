package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/procstat"
)

// process is one program a mode runs beside the control plane: its scheduler, or what runs with
// it (lockstep, Volcano's controller-manager).
type process interface {
	// start runs it and returns once it is ready to work.
	start(ctx context.Context) error
	stop()
	// pid is its process id, 0 when it does not run.
	pid() int
	// url is the base URL of its /debug/pprof/, "" when it serves none.
	url() string
}

// usage is what one process of a mode cost over the whole mode: CPU seconds over all its runs (a
// scheduler runs once per phase), and the most resident memory any run reached.
type usage struct {
	name   string
	cpu    float64
	peakMB float64
}

// metered is a process whose every run is metered into use; stop reads the run's cost just
// before it ends it.
type metered struct {
	process
	use        usage
	startTicks int64
}

func newMetered(name string, p process) *metered { return &metered{process: p, use: usage{name: name}} }

func (m *metered) start(ctx context.Context) error {
	if err := m.process.start(ctx); err != nil {
		return err
	}
	m.startTicks = procstat.CPUTicks(m.pid())
	return nil
}

func (m *metered) stop() {
	if pid := m.pid(); pid != 0 {
		m.use.cpu += float64(procstat.CPUTicks(pid)-m.startTicks) / procstat.TicksPerSecond
		m.use.peakMB = max(m.use.peakMB, procstat.PeakResidentMB(pid))
	}
	m.process.stop()
}

// kubeScheduler is kube-scheduler or another build of its command (scheduler-plugins',
// koord-scheduler), run by the cluster with a KubeSchedulerConfiguration.
type kubeScheduler struct {
	c    *cluster.Cluster
	opts cluster.SchedulerOptions
}

func (k *kubeScheduler) start(ctx context.Context) error { return k.c.StartSchedulerWith(ctx, k.opts) }
func (k *kubeScheduler) stop()                           { k.c.StopScheduler() }
func (k *kubeScheduler) pid() int                        { return k.c.Pid(cluster.KubeScheduler) }
func (k *kubeScheduler) url() string                     { return k.c.SchedulerURL() }

// component is a program of bin/ with a command line of its own, ready once its log says so.
type component struct {
	c      *cluster.Cluster
	binary string
	args   []string
	// ready is a line the program logs once its caches have synced and it works.
	ready string
	proc  *cluster.Component
}

// componentReadyTimeout bounds the wait for a component's ready line.
const componentReadyTimeout = 2 * time.Minute

func (p *component) start(ctx context.Context) error {
	if err := requireBinary(p.c.BinDir, p.binary); err != nil {
		return err
	}
	log := filepath.Join(p.c.WorkDir, p.binary+".log")
	from := fileSize(log)
	proc, err := p.c.StartComponent(p.binary, p.binary, p.args...)
	if err != nil {
		return err
	}
	if err := awaitLogLine(ctx, proc, log, from, p.ready); err != nil {
		proc.Stop()
		return err
	}
	p.proc = proc
	return nil
}

func (p *component) stop() {
	if p.proc != nil {
		p.proc.Stop()
		p.proc = nil
	}
}

func (p *component) pid() int {
	if p.proc == nil || p.proc.Exited() {
		return 0
	}
	return p.proc.Pid()
}

func (p *component) url() string { return "" }

// awaitLogLine waits until the log, past offset from, holds line; it fails at once when the
// process exits first.
func awaitLogLine(ctx context.Context, proc *cluster.Component, log string, from int64, line string) error {
	err := wait.PollUntilContextTimeout(ctx, pollEvery, componentReadyTimeout, true, func(context.Context) (bool, error) {
		if proc.Exited() {
			return false, fmt.Errorf("%s exited before it logged %q: %v\n%s", filepath.Base(log), line, proc.ExitErr(), proc.Tail(20))
		}
		return strings.Contains(readFrom(log, from), line), nil
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("%s did not log %q within %s; its log ends:\n%s", log, line, componentReadyTimeout, proc.Tail(20))
	}
	return err
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// readFrom is a file's content past offset from ("" when unreadable).
func readFrom(path string, from int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return ""
	}
	raw, _ := io.ReadAll(f)
	return string(raw)
}

// requireBinary fails, naming the make target that builds it, when a program is not in bin/.
func requireBinary(binDir, name string) error {
	if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
		return fmt.Errorf("%s not built: run make %s (make bench does)", filepath.Join(binDir, name), buildTargets[name])
	}
	return nil
}

// buildTargets are the make targets that build the peers' programs into bin/.
var buildTargets = map[string]string{
	spScheduler:          "scheduler-plugins",
	vcScheduler:          "vc-scheduler",
	vcControllerManager:  "volcano",
	koordSchedulerBinary: "koord-scheduler",
}
