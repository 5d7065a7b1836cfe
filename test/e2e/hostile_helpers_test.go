package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/require"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/test/lib/procstat"
)

// hostileRSSBoundMB is the most resident memory any hostile input may drive lockstep to: a
// generous bound for a process whose --memory-limit is 256 MiB and that idles near 40 MiB.
const hostileRSSBoundMB = 512

// hostilePromptly is how fast an ordinary call must be answered while lockstep is under attack.
const hostilePromptly = 2 * time.Second

// hostileProc is a lockstep process of the test's own, so that its memory is the attack's alone.
type hostileProc struct {
	*harness.Lockstep
	addr, debugAddr string
}

// startHostileLockstep runs the built binary against the suite's apiserver with the admin
// kubeconfig, on free ports, and stops it when the test ends.
func startHostileLockstep(t *testing.T, bin, name string, extra ...string) *hostileProc {
	t.Helper()
	port, err := cluster.FreePort()
	require.NoError(t, err)
	debugPort, err := cluster.FreePort()
	require.NoError(t, err)
	args := append([]string{"--kubeconfig", env.cluster.AdminKubeconfig,
		"--scheduler-http-timeout=10s", "--bind-wait=8s"}, extra...)
	ls := harness.NewLockstep(bin, filepath.Join(t.TempDir(), name+".log"), port, debugPort, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, ls.Start(ctx), "starting lockstep %s", name)
	p := &hostileProc{Lockstep: ls,
		addr:      strings.TrimPrefix(ls.URL, "http://"),
		debugAddr: strings.TrimPrefix(ls.DebugURL, "http://")}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("lockstep %s log tail:\n%s", name, ls.Tail(3000))
		}
		ls.Kill()
	})
	return p
}

// requireAlive checks the process still runs, its debug /healthz answers within hostilePromptly,
// and its log shows no panic.
func (p *hostileProc) requireAlive(t *testing.T) {
	t.Helper()
	pid := p.Pid()
	require.NotZero(t, pid, "lockstep is not running")
	require.NoError(t, syscall.Kill(pid, 0), "lockstep (pid %d) is gone; log tail:\n%s", pid, p.Tail(3000))
	code, took, err := hostileGet(p.DebugURL + "/healthz")
	require.NoError(t, err, "debug /healthz after the attack; log tail:\n%s", p.Tail(3000))
	require.Equal(t, http.StatusOK, code, "debug /healthz after the attack")
	require.Less(t, took, hostilePromptly, "debug /healthz after the attack")
	log := p.Tail(1 << 20)
	for _, bad := range []string{"panic:", "fatal error:", "goroutine stack exceeds"} {
		require.NotContains(t, log, bad, "lockstep's log")
	}
}

// rssMB is the process's resident memory now, in MiB.
func (p *hostileProc) rssMB() float64 { return procstat.ResidentMB(p.Pid()) }

// openFDs counts the process's open file descriptors (connections among them); -1 if unreadable.
func openFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// maxOpenFiles reads a process's soft limit on open files from /proc/PID/limits.
func maxOpenFiles(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "Max open files") {
			f := strings.Fields(line)
			if len(f) >= 5 {
				return f[3] + " soft / " + f[4] + " hard"
			}
		}
	}
	return "?"
}

// memWatch samples a process's resident memory and open descriptors every 10ms, and resets the
// kernel's peak (VmHWM) at its start, so the peak of an attack is caught even between samples.
type memWatch struct {
	pid            int
	before         float64
	peak           atomic.Uint64 // KiB
	peakFDs        atomic.Int64
	stop, done     chan struct{}
	hwmResetWorked bool
}

func watchMemory(pid int) *memWatch {
	w := &memWatch{pid: pid, before: procstat.ResidentMB(pid), stop: make(chan struct{}), done: make(chan struct{})}
	// "5" resets VmHWM to the current RSS (Linux 4.0+).
	w.hwmResetWorked = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
	w.sample()
	go func() {
		defer close(w.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
				w.sample()
			}
		}
	}()
	return w
}

func (w *memWatch) sample() {
	rss := procstat.ResidentMB(w.pid)
	if rss < 0 {
		return // the process is gone; requireAlive says so
	}
	kib := uint64(rss * 1024)
	for old := w.peak.Load(); kib > old && !w.peak.CompareAndSwap(old, kib); old = w.peak.Load() {
	}
	fds := int64(openFDs(w.pid))
	for old := w.peakFDs.Load(); fds > old && !w.peakFDs.CompareAndSwap(old, fds); old = w.peakFDs.Load() {
	}
}

// peakMB is the highest resident memory seen so far (samples and, when reset worked, VmHWM).
func (w *memWatch) peakMB() float64 {
	peak := float64(w.peak.Load()) / 1024
	if w.hwmResetWorked {
		if hwm := procstat.PeakResidentMB(w.pid); hwm > peak {
			peak = hwm
		}
	}
	return peak
}

// finish stops sampling and returns the peak.
func (w *memWatch) finish() float64 {
	close(w.stop)
	<-w.done
	w.sample()
	return w.peakMB()
}

// hostileRow is one line of the figures table.
type hostileRow struct {
	name, input, answer string
	took                time.Duration
	before, peak, after float64
	others              string
}

type hostileTable struct {
	mu   sync.Mutex
	rows []hostileRow
}

func (tb *hostileTable) add(t *testing.T, r hostileRow) {
	t.Helper()
	tb.mu.Lock()
	tb.rows = append(tb.rows, r)
	tb.mu.Unlock()
	t.Logf("FIGURE %s | %s | %s | %s | RSS MiB %s | %s", r.name, r.input, r.answer, fmtDur(r.took), fmtRSS(r), r.others)
}

func (tb *hostileTable) String() string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
	fmt.Fprintln(w, "case\tinput\tanswer\ttime\tRSS MiB before/peak/after\tother calls meanwhile")
	for _, r := range tb.rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.name, r.input, r.answer, fmtDur(r.took), fmtRSS(r), r.others)
	}
	_ = w.Flush()
	return b.String()
}

func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func fmtRSS(r hostileRow) string {
	f := func(v float64) string {
		if v <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f", v)
	}
	return f(r.before) + "/" + f(r.peak) + "/" + f(r.after)
}

// short cuts an answer to fit the table.
func short(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// lastConnect is how long the last traced call took to connect (TCP handshake), in ns: a second
// or more there means the SYN was dropped and sent again, i.e. the listen queue overflowed.
var lastConnect atomic.Int64

// traced is a context whose calls record their connect time in lastConnect. The prober's calls
// run one at a time, so the last value is theirs.
func traced() context.Context {
	var began time.Time
	return httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		ConnectStart: func(string, string) { began = time.Now() },
		ConnectDone: func(string, string, error) {
			if !began.IsZero() {
				lastConnect.Store(int64(time.Since(began)))
			}
		},
	})
}

// noKeepAlive dials a new connection for every call, so that calls measured during a flood
// also show that lockstep still accepts connections.
var noKeepAlive = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func hostileGet(url string) (int, time.Duration, error) {
	start := time.Now()
	req, err := http.NewRequestWithContext(traced(), http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := noKeepAlive.Do(req)
	if err != nil {
		return 0, time.Since(start), err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start), nil
}

// hostilePost sends body and returns the status, the answer (whole) and how long it took.
func hostilePost(url string, body []byte) (int, []byte, time.Duration, error) {
	start := time.Now()
	req, err := http.NewRequestWithContext(traced(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := noKeepAlive.Do(req)
	if err != nil {
		return 0, nil, time.Since(start), err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, time.Since(start), err
}

// filterArgs is an ExtenderArgs as a nodeCacheCapable kube-scheduler sends it: a small pod and
// node names.
func filterArgs(names []string) []byte {
	pod := builders.Pod("hostile", "small").CPU("100m").Memory("64Mi").Obj()
	raw, err := json.Marshal(&extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names})
	if err != nil {
		panic(err)
	}
	return raw
}

// normalFilter is an ordinary filter call: three nodes lockstep does not know, which must each
// fail with a reason in a 200 answer.
func normalFilter(url string) (time.Duration, error) {
	names := []string{"hostile-normal-a", "hostile-normal-b", "hostile-normal-c"}
	code, body, took, err := hostilePost(url+"/filter", filterArgs(names))
	if err != nil {
		return took, err
	}
	if code != http.StatusOK {
		return took, fmt.Errorf("normal /filter: %d %s", code, short(string(body), 200))
	}
	var res extenderv1.ExtenderFilterResult
	if err := json.Unmarshal(body, &res); err != nil {
		return took, fmt.Errorf("normal /filter: undecodable answer: %w", err)
	}
	if n := len(res.FailedNodes) + len(res.FailedAndUnresolvableNodes); n != len(names) || res.Error != "" {
		return took, fmt.Errorf("normal /filter: %d of %d unknown nodes failed, error %q", n, len(names), res.Error)
	}
	return took, nil
}

// prober makes ordinary calls (a /filter and /healthz on the verbs address, /healthz on the debug
// address), each on a new connection, one round every 100ms, until stopped.
type prober struct {
	stop, done  chan struct{}
	began       time.Time
	mu          sync.Mutex
	calls       int
	lat         []time.Duration
	errs        []string
	slowest     time.Duration
	slowestWhat string
}

func startProber(p *hostileProc) *prober {
	pr := &prober{stop: make(chan struct{}), done: make(chan struct{}), began: time.Now()}
	go func() {
		defer close(pr.done)
		for {
			pr.round(p)
			select {
			case <-pr.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return pr
}

func (pr *prober) round(p *hostileProc) {
	record := func(what string, took time.Duration, err error) {
		pr.mu.Lock()
		defer pr.mu.Unlock()
		pr.calls++
		pr.lat = append(pr.lat, took)
		if took > pr.slowest {
			pr.slowest = took
			pr.slowestWhat = fmt.Sprintf("%s at +%s, connect %s", what, fmtDur(time.Since(pr.began)-took), fmtDur(time.Duration(lastConnect.Load())))
		}
		if err != nil {
			pr.errs = append(pr.errs, fmt.Sprintf("%s: %v (after %s)", what, err, fmtDur(took)))
		}
	}
	lastConnect.Store(0)
	took, err := normalFilter(p.URL)
	record("POST /filter", took, err)
	for _, u := range []struct{ what, url string }{{"GET /healthz", p.URL + "/healthz"}, {"GET debug /healthz", p.DebugURL + "/healthz"}} {
		lastConnect.Store(0)
		code, took, err := hostileGet(u.url)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("status %d", code)
		}
		record(u.what, took, err)
	}
}

// proberResult is what the ordinary calls met.
type proberResult struct {
	calls       int
	p50, max    time.Duration
	slowestWhat string
	errs        []string
}

func (r proberResult) String() string {
	return fmt.Sprintf("%d calls, p50 %s, max %s (%s), %d failed", r.calls, fmtDur(r.p50), fmtDur(r.max), r.slowestWhat, len(r.errs))
}

func (pr *prober) finish() proberResult {
	close(pr.stop)
	<-pr.done
	pr.mu.Lock()
	defer pr.mu.Unlock()
	lat := append([]time.Duration(nil), pr.lat...)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r := proberResult{calls: pr.calls, errs: pr.errs, slowestWhat: pr.slowestWhat}
	if len(lat) > 0 {
		r.p50, r.max = lat[len(lat)/2], lat[len(lat)-1]
	}
	return r
}

// requireProber checks that ordinary calls were made, all answered, none slower than
// hostilePromptly.
func requireProber(t *testing.T, r proberResult, during string) {
	t.Helper()
	require.NotZero(t, r.calls, "no ordinary call was made during %s", during)
	require.Empty(t, r.errs, "ordinary calls failed during %s", during)
	require.Less(t, r.max, hostilePromptly, "the slowest ordinary call during %s", during)
}

// rawResult is how a raw connection ended: what the server wrote before closing, and when.
type rawResult struct {
	took        time.Duration // from the dial to the server's close (or our deadline)
	answer      string        // the status line and the answer's JSON error, "" if none
	closed      bool          // the server closed the connection (EOF or reset)
	deadlineHit bool          // our own safety deadline ran out first
}

// readUntilClosed reads from c until the server closes it or the deadline passes.
func readUntilClosed(c net.Conn, dialed time.Time, deadline time.Time) rawResult {
	_ = c.SetReadDeadline(deadline)
	var got bytes.Buffer
	_, err := io.Copy(&got, bufio.NewReader(c))
	r := rawResult{took: time.Since(dialed), answer: summarizeRaw(got.Bytes())}
	var ne net.Error
	switch {
	case err == nil, errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF):
		r.closed = true
	case errors.As(err, &ne) && ne.Timeout():
		r.deadlineHit = true
	default:
		r.closed = true // any other read error is the connection's end too
	}
	return r
}

// summarizeRaw turns a raw HTTP answer into "STATUS: error message".
func summarizeRaw(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	head, body, _ := bytes.Cut(raw, []byte("\r\n\r\n"))
	status, _, _ := bytes.Cut(head, []byte("\r\n"))
	s := strings.TrimPrefix(string(status), "HTTP/1.1 ")
	var e struct{ Error string }
	if json.Unmarshal(bytes.TrimSpace(body), &e) == nil && e.Error != "" {
		return s + ": " + e.Error
	}
	return s + ": " + string(bytes.TrimSpace(body))
}

// statusOf is the numeric status of a summarized answer, 0 if none.
func statusOf(answer string) int {
	var code int
	if _, err := fmt.Sscanf(answer, "%d", &code); err != nil {
		return 0
	}
	return code
}
