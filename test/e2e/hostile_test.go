package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/lockstep-sched/lockstep/test/lib/harness"
)

// The timeouts lockstep's listeners run with (package serving), as the test starts it: the verbs'
// ReadTimeout is --scheduler-http-timeout.
const (
	hostileReadHeaderTimeout = 5 * time.Second
	hostileReadTimeout       = 10 * time.Second
	// hostileSlack is what a loaded two-core machine may add to a server-side timeout.
	hostileSlack = 3 * time.Second
	// hostileConns is how many connections the flood holds open at once.
	hostileConns = 1000
)

// TestHostile sends hostile input to a lockstep process of its own (so that its memory is
// measured alone): a filter call with 200,000 node names, JSON nested 100,000 deep, slow clients,
// a thousand connections held open, bodies over --max-request-bytes, and bodies that only declare
// a large length. Each must get a clear answer or a closed connection within a deadline, with
// lockstep's resident memory under hostileRSSBoundMB and ordinary calls answered meanwhile. The
// figures are logged as a table at the end.
func TestHostile(t *testing.T) {
	began := time.Now()
	var table hostileTable
	t.Cleanup(func() {
		t.Logf("hostile input against lockstep, figures (whole test %s):\n%s", time.Since(began).Round(100*time.Millisecond), table.String())
	})
	ensureOpenFiles(t, 2*hostileConns+512)

	built := time.Now()
	bin, err := harness.BuildExtender(env.root, t.TempDir(), false)
	require.NoError(t, err)
	t.Logf("built lockstep without -race in %s", time.Since(built).Round(time.Millisecond))
	ls := startHostileLockstep(t, bin, "lockstep-hostile")
	t.Logf("lockstep pid %d, verbs %s, debug %s, RSS at start %.0f MiB, open files %s",
		ls.Pid(), ls.URL, ls.DebugURL, ls.rssMB(), maxOpenFiles(ls.Pid()))

	t.Run("1_filter_200k_node_names", func(t *testing.T) { hostileBigFilter(t, ls, &table) })
	t.Run("2_nested_json_100k_deep", func(t *testing.T) { hostileNested(t, ls, &table) })
	t.Run("3_slow_clients", func(t *testing.T) { hostileSlowloris(t, ls, &table) })
	t.Run("4_1000_connections", func(t *testing.T) { hostileFlood(t, ls, &table) })
	t.Run("5_oversized_body", func(t *testing.T) { hostileOversized(t, bin, &table) })
	t.Run("6_declared_length_only", func(t *testing.T) { hostileDeclaredLength(t, ls, &table) })
}

// ensureOpenFiles makes sure this process may hold need descriptors, raising its soft limit when
// the hard limit allows.
func ensureOpenFiles(t *testing.T, need uint64) {
	t.Helper()
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	if lim.Cur >= need {
		t.Logf("open files: soft limit %d, hard %d (the test needs about %d); not raised", lim.Cur, lim.Max, need)
		return
	}
	if lim.Max < need {
		t.Skipf("open files: hard limit %d is below the %d the test needs", lim.Max, need)
	}
	old := lim.Cur
	lim.Cur = min(lim.Max, 2*need)
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	t.Logf("open files: raised this process's soft limit from %d to %d (hard %d) with setrlimit", old, lim.Cur, lim.Max)
}

// 1. A filter call whose NodeNames are 200,000 nodes nobody has.
func hostileBigFilter(t *testing.T, ls *hostileProc, table *hostileTable) {
	const n = 200_000
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("hostile-absent-%06d", i)
	}
	body := filterArgs(names)
	w := watchMemory(ls.Pid())
	code, answer, took, err := hostilePost(ls.URL+"/filter", body)
	peak := w.finish()
	after := ls.rssMB()
	require.NoError(t, err, "POST /filter with %d node names", n)

	var said string
	switch {
	case code == http.StatusOK:
		var res extenderv1.ExtenderFilterResult
		require.NoError(t, json.Unmarshal(answer, &res), "a 200 answer must be an ExtenderFilterResult")
		require.Empty(t, res.Error)
		failed := map[string]string{}
		for k, v := range res.FailedNodes {
			failed[k] = v
		}
		for k, v := range res.FailedAndUnresolvableNodes {
			failed[k] = v
		}
		require.Len(t, failed, n, "every unknown node must fail")
		passed := 0
		if res.NodeNames != nil {
			passed = len(*res.NodeNames)
		}
		require.Zero(t, passed, "no unknown node may pass")
		for _, name := range []string{names[0], names[n/2], names[n-1]} {
			require.NotEmpty(t, failed[name], "node %s must fail with a reason", name)
		}
		said = fmt.Sprintf("200, %d nodes failed: %q (%.1f MB)", len(failed), failed[names[0]], float64(len(answer))/1e6)
	case code >= 400 && code < 500:
		var e struct{ Error string }
		require.NoError(t, json.Unmarshal(answer, &e), "a 4xx answer must carry a JSON error")
		require.NotEmpty(t, e.Error)
		said = fmt.Sprintf("%d: %s", code, e.Error)
	default:
		t.Fatalf("POST /filter with %d node names: status %d, want 200 or a 4xx: %s", n, code, short(string(answer), 300))
	}
	normalTook, err := normalFilter(ls.URL)
	require.NoError(t, err, "an ordinary /filter right after the big one")
	table.add(t, hostileRow{name: "1 filter", input: fmt.Sprintf("NodeNames: %dk unknown names (%.1f MB)", n/1000, float64(len(body))/1e6),
		answer: said, took: took, before: w.before, peak: peak, after: after,
		others: "normal /filter right after: " + fmtDur(normalTook)})
	require.Less(t, took, hostileReadTimeout, "the scheduler gives up after its httpTimeout; an answer later than that is useless")
	require.Less(t, normalTook, hostilePromptly, "an ordinary /filter right after the big one")
	require.Less(t, peak, float64(hostileRSSBoundMB), "lockstep's peak RSS (MiB)")
	ls.requireAlive(t)
}

// 2. JSON nested 100,000 levels deep, in the pod and in other fields, on every verb that decodes.
func hostileNested(t *testing.T, ls *hostileProc, table *hostileTable) {
	const depth = 100_000
	arrays := func() string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }
	objects := func() string { return strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth) }
	cases := []struct{ name, path, body string }{
		{"Pod = [[[…]]]", "/filter", `{"Pod":` + arrays() + `,"NodeNames":["n1"],"Nodes":null}`},
		{`Pod = {"a":{"a":…}}`, "/filter", `{"Pod":` + objects() + `,"NodeNames":["n1"],"Nodes":null}`},
		{`Pod.spec = {"a":{"a":…}}`, "/filter", `{"Pod":{"metadata":{"name":"p","namespace":"d"},"spec":` + objects() + `},"NodeNames":["n1"],"Nodes":null}`},
		{`Pod.metadata.labels = {"a":{"a":…}}`, "/filter", `{"Pod":{"metadata":{"name":"p","namespace":"d","labels":` + objects() + `}},"NodeNames":["n1"],"Nodes":null}`},
		{"NodeNames = [[[…]]]", "/filter", `{"Pod":{"metadata":{"name":"p"}},"NodeNames":` + arrays() + `,"Nodes":null}`},
		{`Nodes = {"a":{"a":…}}`, "/prioritize", `{"Pod":{"metadata":{"name":"p"}},"Nodes":` + objects() + `}`},
		{"whole body [[[…]]]", "/filter", arrays()},
		{"Pod = [[[… never closed", "/filter", `{"Pod":` + strings.Repeat("[", depth)},
		{`unknown field = {"a":{"a":…}}`, "/bind", `{"PodName":"p","PodNamespace":"d","Node":"n","X":` + objects() + `}`},
		{`Pod = {"a":{"a":…}}`, "/preempt", `{"Pod":` + objects() + `}`},
	}
	for _, c := range cases {
		w := watchMemory(ls.Pid())
		code, answer, took, err := hostilePost(ls.URL+c.path, []byte(c.body))
		peak := w.finish()
		require.NoError(t, err, "%s %s", c.path, c.name)
		var e struct{ Error string }
		_ = json.Unmarshal(answer, &e)
		table.add(t, hostileRow{name: "2 nested", input: fmt.Sprintf("%s %s (%d KB)", c.path, c.name, len(c.body)/1000),
			answer: fmt.Sprintf("%d: %s", code, short(e.Error, 110)), took: took, before: w.before, peak: peak, after: ls.rssMB()})
		require.Equal(t, http.StatusBadRequest, code, "%s %s: %s", c.path, c.name, short(string(answer), 300))
		require.NotEmpty(t, e.Error, "%s %s: the 400 must say why in JSON", c.path, c.name)
		require.Less(t, len(answer), 1024, "%s %s: the error must be short, not echo the input", c.path, c.name)
		require.Less(t, took, hostilePromptly, "%s %s", c.path, c.name)
		require.Less(t, peak, float64(hostileRSSBoundMB), "lockstep's peak RSS (MiB)")
		ls.requireAlive(t)
	}
}

// 3. Slow clients: one sends its headers a byte a second, one sends its headers at once and then
// its body a byte a second. Ordinary calls go on meanwhile.
func hostileSlowloris(t *testing.T, ls *hostileProc, table *hostileTable) {
	const bodyLen = 64
	headers := fmt.Sprintf("POST /filter HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", ls.addr, bodyLen)
	body := "{" + strings.Repeat(" ", bodyLen-2) + "}"

	w := watchMemory(ls.Pid())
	pr := startProber(ls)
	type outcome struct {
		rawResult
		sent int
	}
	var slowHead, slowBody outcome
	var wg sync.WaitGroup
	run := func(out *outcome, atOnce, trickled string) {
		defer wg.Done()
		c, err := net.DialTimeout("tcp", ls.addr, 2*time.Second)
		if err != nil {
			out.answer = "dial: " + err.Error()
			return
		}
		defer c.Close()
		dialed := time.Now()
		if atOnce != "" {
			if _, err := c.Write([]byte(atOnce)); err != nil {
				out.answer = "write: " + err.Error()
				return
			}
		}
		stop := make(chan struct{})
		sent := make(chan int, 1)
		go func() { sent <- trickle(c, []byte(trickled), stop) }()
		out.rawResult = readUntilClosed(c, dialed, dialed.Add(hostileReadTimeout+3*hostileSlack))
		close(stop)
		out.sent = <-sent
	}
	wg.Add(2)
	go run(&slowHead, "", headers)
	go run(&slowBody, headers, body)
	wg.Wait()
	others := pr.finish()
	peak := w.finish()
	after := ls.rssMB()

	answerOf := func(o outcome) string {
		if o.answer == "" {
			return "closed without an answer"
		}
		return "closed after " + short(o.answer, 110)
	}
	table.add(t, hostileRow{name: "3 slow headers", input: fmt.Sprintf("headers at 1 byte/s (%d of %d bytes sent)", slowHead.sent, len(headers)),
		answer: answerOf(slowHead), took: slowHead.took, before: w.before, peak: peak, after: after, others: others.String()})
	table.add(t, hostileRow{name: "3 slow body", input: fmt.Sprintf("headers at once, body at 1 byte/s (%d of %d bytes sent)", slowBody.sent, bodyLen),
		answer: answerOf(slowBody), took: slowBody.took, before: w.before, peak: peak, after: after, others: others.String()})

	require.True(t, slowHead.closed, "lockstep did not close a connection sending its headers at a byte a second within %s", slowHead.took)
	require.Less(t, slowHead.took, hostileReadHeaderTimeout+hostileSlack, "ReadHeaderTimeout should cut slow headers")
	require.Less(t, slowHead.sent, len(headers), "the slow headers should be cut before they are complete")
	require.True(t, slowBody.closed, "lockstep did not close a connection sending its body at a byte a second within %s", slowBody.took)
	require.Less(t, slowBody.took, hostileReadTimeout+hostileSlack, "ReadTimeout (the scheduler's httpTimeout) should cut a slow body")
	require.Less(t, slowBody.sent, bodyLen, "the slow body should be cut before it is complete")
	if code := statusOf(slowBody.answer); code != 0 {
		require.True(t, code >= 400 && code < 500, "a body cut short must not get a %d: %s", code, slowBody.answer)
	}
	requireProber(t, others, "the slow clients")
	require.Less(t, peak, float64(hostileRSSBoundMB), "lockstep's peak RSS (MiB)")
	ls.requireAlive(t)
}

// trickle writes data a byte a second, the first at once, until it is all sent, a write fails
// or stop closes, and returns how many bytes went.
func trickle(c net.Conn, data []byte, stop <-chan struct{}) int {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := range data {
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := c.Write(data[i : i+1]); err != nil {
			return i
		}
		if i == len(data)-1 {
			return len(data)
		}
		select {
		case <-stop:
			return i + 1
		case <-tick.C:
		}
	}
	return len(data)
}

// 4. A thousand connections at once: first idle, then each sending a request whose body trickles.
func hostileFlood(t *testing.T, ls *hostileProc, table *hostileTable) {
	t.Run("idle", func(t *testing.T) {
		floodRound(t, ls, table, "4 idle conns", fmt.Sprintf("%d connections, nothing sent", hostileConns),
			"", false, hostileReadHeaderTimeout)
	})
	t.Run("slow_request", func(t *testing.T) {
		const bodyLen = 4096
		headers := fmt.Sprintf("POST /filter HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", ls.addr, bodyLen)
		floodRound(t, ls, table, "4 slow requests", fmt.Sprintf("%d connections, headers + body of %d B at 1 byte/s", hostileConns, bodyLen),
			headers, true, hostileReadTimeout)
	})
}

// floodRound opens hostileConns connections, writes first on each, then (when trickling) a space a
// second on each still open, and waits for lockstep to close them all within cutBy plus slack,
// while ordinary calls are made.
func floodRound(t *testing.T, ls *hostileProc, table *hostileTable, name, input, first string, trickling bool, cutBy time.Duration) {
	w := watchMemory(ls.Pid())
	pr := startProber(ls)
	conns := make([]net.Conn, 0, hostileConns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	results := make(chan rawResult, hostileConns)
	done := make([]atomic.Bool, hostileConns)
	openStart := time.Now()
	for i := 0; i < hostileConns; i++ {
		c, err := net.DialTimeout("tcp", ls.addr, 5*time.Second)
		require.NoError(t, err, "dialing connection %d", i)
		dialed := time.Now()
		conns = append(conns, c)
		if first != "" {
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, err := c.Write([]byte(first))
			require.NoError(t, err, "writing on connection %d", i)
		}
		go func() {
			r := readUntilClosed(c, dialed, dialed.Add(cutBy+4*hostileSlack))
			done[i].Store(true)
			results <- r
		}()
	}
	opened := time.Since(openStart)
	stopPacer := make(chan struct{})
	pacerDone := make(chan struct{})
	go func() {
		defer close(pacerDone)
		if !trickling {
			return
		}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopPacer:
				return
			case <-tick.C:
			}
			for i, c := range conns {
				if !done[i].Load() {
					_ = c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
					_, _ = c.Write([]byte(" "))
				}
			}
		}
	}()

	var slowest time.Duration
	closed, ourDeadline := 0, 0
	answers := map[string]int{}
	for range hostileConns {
		r := <-results
		slowest = max(slowest, r.took)
		if r.closed {
			closed++
		}
		if r.deadlineHit {
			ourDeadline++
		}
		a := r.answer
		if a == "" {
			a = "closed without an answer"
		}
		answers[short(redactAddrs(a), 90)]++
	}
	close(stopPacer)
	<-pacerDone
	others := pr.finish()
	peakFDs := w.peakFDs.Load()
	peak := w.finish()
	after := ls.rssMB()

	var said []string
	for a, n := range answers {
		said = append(said, fmt.Sprintf("%d× %s", n, a))
	}
	table.add(t, hostileRow{name: name, input: input,
		answer: fmt.Sprintf("%d/%d closed by lockstep (peak %d fds in lockstep; opened in %s); %s", closed, hostileConns, peakFDs, fmtDur(opened), strings.Join(said, "; ")),
		took:   slowest, before: w.before, peak: peak, after: after, others: others.String()})

	require.GreaterOrEqual(t, peakFDs, int64(hostileConns*9/10), "lockstep should have held (almost) all %d connections at once", hostileConns)
	require.Zero(t, ourDeadline, "connections lockstep never closed")
	require.Equal(t, hostileConns, closed, "connections lockstep closed")
	require.Less(t, slowest, cutBy+hostileSlack, "the last connection to be cut, counted from its dial")
	for a := range answers {
		if code := statusOf(a); code != 0 {
			require.True(t, code >= 400 && code < 500, "a request cut short must not get a %d: %s", code, a)
		}
	}
	requireProber(t, others, name)
	require.Less(t, peak, float64(hostileRSSBoundMB), "lockstep's peak RSS (MiB)")
	ls.requireAlive(t)
}

// redactAddrs drops the ports of the "read tcp A->B" in a network error, so that equal answers
// count together.
func redactAddrs(s string) string {
	fields := strings.Fields(s)
	for i, f := range fields {
		if strings.Contains(f, "127.0.0.1:") {
			fields[i] = "ADDR"
		}
	}
	return strings.Join(fields, " ")
}

// 5. Bodies over --max-request-bytes (1 MiB on a second lockstep): declared 1 GiB with
// Content-Length, and streamed chunked with no length.
func hostileOversized(t *testing.T, bin string, table *hostileTable) {
	const limit = 1 << 20
	ls := startHostileLockstep(t, bin, "lockstep-hostile-1mib", "--max-request-bytes="+strconv.Itoa(limit))
	for _, chunked := range []bool{false, true} {
		input := "Content-Length: 1 GiB declared, streamed as fast as it goes"
		if chunked {
			input = "chunked, no length, 1 GiB streamed as fast as it goes"
		}
		w := watchMemory(ls.Pid())
		r := streamOversized(t, ls.addr, 1<<30, chunked)
		peak := w.finish()
		table.add(t, hostileRow{name: "5 oversized", input: input + " (limit 1 MiB)",
			answer: fmt.Sprintf("%s; answered after %.1f MiB sent, %.1f MiB sent in all", short(r.answer, 110), float64(r.sentAtAnswer)/(1<<20), float64(r.sentInAll)/(1<<20)),
			took:   r.answeredAfter, before: w.before, peak: peak, after: ls.rssMB()})
		require.Equal(t, http.StatusRequestEntityTooLarge, statusOf(r.answer), "answer: %q", r.answer)
		require.Contains(t, r.answer, fmt.Sprintf("over the %d-byte limit (--max-request-bytes)", limit), "the 413 must say what limit was crossed")
		require.Less(t, r.answeredAfter, hostilePromptly, "time to the 413")
		require.True(t, r.closed, "lockstep must close the connection after refusing the body")
		require.Less(t, r.sentInAll, int64(64<<20), "lockstep must stop taking the body soon after the limit, not read 1 GiB")
		require.Less(t, peak, float64(hostileRSSBoundMB), "lockstep's peak RSS (MiB)")
		ls.requireAlive(t)
		took, err := normalFilter(ls.URL)
		require.NoError(t, err, "an ordinary /filter after the oversized body")
		require.Less(t, took, hostilePromptly)
	}
}

type oversizedResult struct {
	answer                  string
	answeredAfter           time.Duration
	sentAtAnswer, sentInAll int64
	closed                  bool
}

// streamOversized declares (or, chunked, streams without declaring) a body of total bytes and
// writes it as fast as lockstep takes it, until lockstep answers and the connection ends.
func streamOversized(t *testing.T, addr string, total int64, chunked bool) oversizedResult {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	require.NoError(t, err)
	defer c.Close()
	head := fmt.Sprintf("POST /filter HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, total)
	if chunked {
		head = fmt.Sprintf("POST /filter HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", addr)
	}
	start := time.Now()
	_, err = c.Write([]byte(head))
	require.NoError(t, err)

	var sent atomic.Int64
	answered := make(chan struct{})
	var res oversizedResult
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		_ = c.SetReadDeadline(start.Add(10 * time.Second))
		var got bytes.Buffer
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 && got.Len() == 0 {
				res.answeredAfter, res.sentAtAnswer = time.Since(start), sent.Load()
				close(answered)
			}
			got.Write(buf[:n])
			if err != nil {
				var ne net.Error
				res.closed = !(errors.As(err, &ne) && ne.Timeout())
				break
			}
		}
		res.answer = summarizeRaw(got.Bytes())
	}()

	chunk := bytes.Repeat([]byte(" "), 64<<10)
	frame := chunk
	if chunked {
		frame = append(append([]byte(fmt.Sprintf("%x\r\n", len(chunk))), chunk...), "\r\n"...)
	}
	for sent.Load() < total {
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		n, err := c.Write(frame)
		sent.Add(int64(n))
		if err != nil {
			break // reset by lockstep, or it stopped reading for a second
		}
	}
	res.sentInAll = sent.Load()
	<-readDone
	return res
}

// 6. Requests that declare a body as large as --max-request-bytes allows (64 MiB, the default)
// and send one byte of it: what lockstep commits for a body that never comes.
func hostileDeclaredLength(t *testing.T, ls *hostileProc, table *hostileTable) {
	const n, declared = 12, 64 << 20
	head := fmt.Sprintf("POST /filter HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", ls.addr, declared)
	w := watchMemory(ls.Pid())
	pr := startProber(ls)
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	results := make(chan rawResult, n)
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", ls.addr, 2*time.Second)
		require.NoError(t, err)
		dialed := time.Now()
		conns = append(conns, c)
		_, err = c.Write([]byte(head))
		require.NoError(t, err)
		go func() { results <- readUntilClosed(c, dialed, dialed.Add(hostileReadTimeout+4*hostileSlack)) }()
	}
	// Until lockstep has cut every connection (its ReadTimeout), or its memory is past the bound:
	// then the finding is made, and holding on would only risk the machine.
	start := time.Now()
	var got []rawResult
	overAt := time.Duration(0)
	for len(got) < n && time.Since(start) < hostileReadTimeout+4*hostileSlack {
		select {
		case r := <-results:
			got = append(got, r)
			continue
		case <-time.After(20 * time.Millisecond):
		}
		if w.peakMB() > hostileRSSBoundMB {
			overAt = time.Since(start)
			break
		}
	}
	for _, c := range conns {
		c.Close()
	}
	for len(got) < n {
		got = append(got, <-results)
	}
	others := pr.finish()
	peak := w.finish()
	after := ls.rssMB()
	answer := fmt.Sprintf("peak RSS passed %d MiB %s after the requests", hostileRSSBoundMB, fmtDur(overAt))
	if overAt == 0 {
		answer = "bounded; " + short(redactAddrs(got[0].answer), 80)
	}
	table.add(t, hostileRow{name: "6 declared length", input: fmt.Sprintf("%d conns, each Content-Length: 64 MiB (= limit), 1 byte sent", n),
		answer: answer, took: time.Since(start), before: w.before, peak: peak, after: after, others: others.String()})
	// assert, not require: both the memory and the ordinary calls are findings of their own.
	assert.Less(t, peak, float64(hostileRSSBoundMB),
		"lockstep's peak RSS (MiB) with %d requests that each declare a %d-byte body and send 1 byte of it: +%.0f MiB in %s, %.0f MiB a request; a request's buffer is sized by its declared Content-Length before any of the body arrives",
		n, declared, peak-w.before, fmtDur(time.Since(start)), (peak-w.before)/n)
	if overAt == 0 {
		for _, r := range got {
			assert.True(t, r.closed, "lockstep must cut a request whose declared body never comes, by its ReadTimeout (%s)", hostileReadTimeout)
		}
	}
	assert.Empty(t, others.errs, "ordinary calls failed while requests declared 64 MiB bodies")
	assert.Less(t, others.max, hostilePromptly, "the slowest ordinary call while requests declared 64 MiB bodies (%s)", others)
	ls.requireAlive(t)
}
