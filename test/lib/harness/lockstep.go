// Package harness runs lockstep as its own process beside a real control plane
// (test/lib/cluster), for the end-to-end suite, `make demo` and `make bench`.
package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockstep-sched/lockstep/views"
	"k8s.io/apimachinery/pkg/util/wait"
)

// BuildExtender compiles ./cmd/extender into dir, with the race detector when race is set, and
// returns the binary's path.
func BuildExtender(repoRoot, dir string, race bool) (string, error) {
	bin := filepath.Join(dir, "extender")
	if err := BuildCommand(repoRoot, "./cmd/extender", bin, race); err != nil {
		return "", err
	}
	return bin, nil
}

// BuildCommand compiles the repository's command pkg (e.g. "./test/cmd/floorextender") into the
// file bin, with the race detector when race is set.
func BuildCommand(repoRoot, pkg, bin string, race bool) error {
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", pkg, err, out)
	}
	return nil
}

// BuildExtenderAt compiles ./cmd/extender as it was at git revision rev of the repository into
// dir/baseline, and returns the binary's path. It builds in a worktree under dir that it removes
// again, so that the repository's own working tree, changes and all, is left as it is.
func BuildExtenderAt(repoRoot, dir, rev string) (string, error) {
	src := filepath.Join(dir, "baseline-src")
	if _, err := git(repoRoot, "worktree", "add", "--detach", src, rev); err != nil {
		return "", err
	}
	defer func() { _, _ = git(repoRoot, "worktree", "remove", "--force", src) }()
	out := filepath.Join(dir, "baseline")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	return BuildExtender(src, out, false)
}

// ShortRevision is the abbreviated hash of the commit a git revision (HEAD~1, a branch) names now:
// a label that still says what was measured once the branch has moved on.
func ShortRevision(repoRoot, rev string) (string, error) {
	out, err := git(repoRoot, "rev-parse", "--verify", "--short", rev+"^{commit}")
	return strings.TrimSpace(out), err
}

// git runs git in dir and returns its standard output; a failure carries what git said.
func git(dir string, args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("%w\n%s", err, exit.Stderr)
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// Lockstep is a running (or stopped) lockstep process.
type Lockstep struct {
	Binary  string
	Args    []string
	LogPath string
	// URL is http://127.0.0.1:<port>, where the scheduler calls the verbs.
	URL string
	// DebugURL is http://127.0.0.1:<port> of --debug-listen: /debug/gangs, /metrics, the
	// profiler.
	DebugURL string
	cmd      *exec.Cmd
	log      *os.File
}

// NewLockstep prepares a lockstep serving the verbs on 127.0.0.1:port and what people read on
// 127.0.0.1:debugPort; extra flags follow (a later --listen wins).
func NewLockstep(binary, logPath string, port, debugPort int, extra ...string) *Lockstep {
	addr, debug := fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("127.0.0.1:%d", debugPort)
	return &Lockstep{
		Binary:   binary,
		Args:     append([]string{"--listen", addr, "--debug-listen", debug}, extra...),
		LogPath:  logPath,
		URL:      "http://" + addr,
		DebugURL: "http://" + debug,
	}
}

// Start runs the process and waits until /readyz answers 200 (its informers synced) on the debug
// address, which is plain HTTP whatever the verbs' address serves.
func (l *Lockstep) Start(ctx context.Context) error {
	if l.cmd != nil {
		return fmt.Errorf("lockstep is already running (pid %d)", l.cmd.Process.Pid)
	}
	log, err := os.OpenFile(l.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(l.Binary, l.Args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting lockstep: %w", err)
	}
	l.cmd, l.log = cmd, log
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("lockstep exited during start-up: %s", l.Tail(4096))
		default:
		}
		resp, err := http.Get(l.DebugURL + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		l.Kill()
		return fmt.Errorf("lockstep did not become ready: %w; log tail:\n%s", err, l.Tail(4096))
	}
	return nil
}

// Pid is the running process's id, 0 when it is not running.
func (l *Lockstep) Pid() int {
	if l.cmd == nil {
		return 0
	}
	return l.cmd.Process.Pid
}

// Kill stops the process at once, as a crash would: no graceful shutdown.
func (l *Lockstep) Kill() {
	if l.cmd == nil {
		return
	}
	_ = syscall.Kill(-l.cmd.Process.Pid, syscall.SIGKILL)
	_ = l.cmd.Process.Kill()
	// Wait is done by the goroutine started in Start; give the process a moment to be reaped by
	// polling its existence rather than sleeping blindly.
	_ = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return syscall.Kill(l.cmd.Process.Pid, 0) != nil, nil
	})
	l.cmd = nil
	if l.log != nil {
		l.log.Close()
		l.log = nil
	}
}

// Tail returns the last n bytes of lockstep's log.
func (l *Lockstep) Tail(n int64) string {
	f, err := os.Open(l.LogPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// BindCounts is lockstep_binds_total summed over its kinds: the bindings lockstep counts as
// confirmed by the apiserver, and those that failed.
type BindCounts struct{ Committed, Failed int }

// BindCounts reads lockstep's bind counters from its /metrics.
func (l *Lockstep) BindCounts(ctx context.Context) (BindCounts, error) {
	lines, err := l.MetricLines(ctx, "lockstep_binds_total{")
	if err != nil {
		return BindCounts{}, err
	}
	var c BindCounts
	for _, line := range lines {
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return BindCounts{}, fmt.Errorf("lockstep /metrics: %q: %w", line, err)
		}
		switch {
		case strings.Contains(line, `result="committed"`):
			c.Committed += int(v)
		case strings.Contains(line, `result="failed"`):
			c.Failed += int(v)
		}
	}
	return c, nil
}

// Metric reads one series of lockstep's /metrics, written as /metrics prints it (name and
// labels, e.g. lockstep_leading); found is false when lockstep does not print it (a counter
// before its first count).
func (l *Lockstep) Metric(ctx context.Context, series string) (value float64, found bool, err error) {
	lines, err := l.MetricLines(ctx, series+" ")
	if err != nil || len(lines) == 0 {
		return 0, false, err
	}
	value, err = strconv.ParseFloat(strings.TrimPrefix(lines[0], series+" "), 64)
	if err != nil {
		return 0, false, fmt.Errorf("lockstep /metrics: %q: %w", lines[0], err)
	}
	return value, true, nil
}

// MetricLines are the lines of lockstep's /metrics that start with prefix.
func (l *Lockstep) MetricLines(ctx context.Context, prefix string) ([]string, error) {
	resp, err := l.getDebug(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			lines = append(lines, sc.Text())
		}
	}
	return lines, sc.Err()
}

// GangsJSON is lockstep's /debug/gangs, narrowed to namespace unless it is empty.
func (l *Lockstep) GangsJSON(ctx context.Context, namespace string) (json.RawMessage, error) {
	resp, err := l.getDebug(ctx, "/debug/gangs?namespace="+url.QueryEscape(namespace))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		return nil, fmt.Errorf("lockstep /debug/gangs: %w", err)
	}
	return raw, nil
}

// Gangs is GangsJSON decoded.
func (l *Lockstep) Gangs(ctx context.Context, namespace string) ([]views.GangStatus, error) {
	raw, err := l.GangsJSON(ctx, namespace)
	if err != nil {
		return nil, err
	}
	var list []views.GangStatus
	return list, json.Unmarshal(raw, &list)
}

// Nodes is lockstep's /debug/nodes.
func (l *Lockstep) Nodes(ctx context.Context) ([]views.NodeStatus, error) {
	resp, err := l.getDebug(ctx, "/debug/nodes")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list []views.NodeStatus
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("lockstep /debug/nodes: %w", err)
	}
	return list, nil
}

// getDebug GETs a path of lockstep's debug address; the caller closes the body of a 200.
func (l *Lockstep) getDebug(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.DebugURL+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("lockstep %s: %s", path, resp.Status)
	}
	return resp, nil
}
