package faultproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const saToken = "service-account-token"

// apiserver stands in for kube-apiserver: TLS with its own CA, pods/binding, pod GET and a pod
// watch whose second event waits for the test.
type apiserver struct {
	*httptest.Server
	// secondEvent lets the watch send its second event.
	secondEvent chan struct{}

	mu    sync.Mutex
	auth  []string // Authorization header of every request
	binds []string
}

func startAPIServer(t *testing.T) *apiserver {
	t.Helper()
	a := &apiserver{secondEvent: make(chan struct{})}
	a.Server = httptest.NewUnstartedServer(http.HandlerFunc(a.serve))
	a.EnableHTTP2 = true
	a.Config.ErrorLog = log.New(io.Discard, "", 0) // the certificate test provokes handshake errors
	a.StartTLS()
	t.Cleanup(a.Close)
	return a
}

// config is how the harness would describe the apiserver: its CA, and an admin token the proxy
// must not use.
func (a *apiserver) config() *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.Certificate().Raw})
	return &rest.Config{Host: a.URL, BearerToken: "admin-token", TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

func (a *apiserver) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.auth = append(a.auth, r.Header.Get("Authorization"))
	a.mu.Unlock()
	pod, ok := parsePodPath(r.URL.Path)
	switch {
	case r.Header.Get("Authorization") != "Bearer "+saToken:
		writeStatus(w, http.StatusUnauthorized, 0, "unknown token")
	case ok && r.Method == http.MethodPost && pod.subresource == "binding":
		a.mu.Lock()
		a.binds = append(a.binds, pod.namespace+"/"+pod.name)
		a.mu.Unlock()
		writeJSON(w, http.StatusCreated, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: 201})
	case ok && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, newPod(pod.namespace, pod.name))
	case r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true":
		a.watch(w, r)
	default:
		writeStatus(w, http.StatusNotFound, 0, "not served by the test apiserver")
	}
}

func (a *apiserver) watch(w http.ResponseWriter, r *http.Request) {
	ns := strings.Split(strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/"), "/")[0]
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	_ = enc.Encode(metav1.WatchEvent{Type: string(watch.Added), Object: rawPod(ns, "first")})
	http.NewResponseController(w).Flush()
	select {
	case <-a.secondEvent:
	case <-r.Context().Done():
		return
	}
	_ = enc.Encode(metav1.WatchEvent{Type: string(watch.Added), Object: rawPod(ns, "second")})
	http.NewResponseController(w).Flush()
	<-r.Context().Done()
}

func (a *apiserver) bindings() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.binds...)
}

func (a *apiserver) authorizations() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.auth...)
}

func newPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func rawPod(ns, name string) runtime.RawExtension {
	raw, _ := json.Marshal(newPod(ns, name))
	return runtime.RawExtension{Raw: raw}
}

func writeJSON(w http.ResponseWriter, code int, obj any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(obj)
}

// startProxy runs a proxy in front of a and a client configured as lockstep configures its own:
// protobuf preferred, JSON accepted.
func startProxy(t *testing.T, a *apiserver) (*Proxy, kubernetes.Interface) {
	t.Helper()
	p, err := Start(a.config())
	require.NoError(t, err)
	t.Cleanup(p.Close)
	cfg := p.ClientConfig(saToken)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return p, client
}

func bind(ctx context.Context, client kubernetes.Interface, ns, name string) error {
	return client.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "node-1"},
	}, metav1.CreateOptions{})
}

func getPod(ctx context.Context, client kubernetes.Interface, ns, name string) error {
	_, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	return err
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitIdle returns once the proxy serves no request, failing the test if that takes too long.
func waitIdle(t *testing.T, p *Proxy) {
	t.Helper()
	idle := make(chan struct{})
	go func() { p.handlers.Wait(); close(idle) }()
	select {
	case <-idle:
	case <-time.After(10 * time.Second):
		t.Fatal("a request is still being served")
	}
}

func TestForwardsWithTheClientsToken(t *testing.T) {
	a := startAPIServer(t)
	_, client := startProxy(t, a)
	ctx := testContext(t)

	pod, err := client.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "p", pod.Name)
	require.NoError(t, bind(ctx, client, "ns", "p"))
	require.Equal(t, []string{"ns/p"}, a.bindings())
	require.Equal(t, []string{"Bearer " + saToken, "Bearer " + saToken}, a.authorizations(),
		"the client's token passes through; the target config's admin token is never sent")
}

// clientcmd drops a kubeconfig's token unless the server is https; the kubeconfig the proxy
// writes must survive loading as lockstep loads it.
func TestKubeconfigClientsSendTheirToken(t *testing.T) {
	a := startAPIServer(t)
	p, _ := startProxy(t, a)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*p.Kubeconfig("lockstep", saToken), path))
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(t, err)
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	require.NoError(t, getPod(testContext(t), client, "ns", "p"))
	require.Equal(t, []string{"Bearer " + saToken}, a.authorizations())
}

func TestVerifiesTheAPIServersCertificate(t *testing.T) {
	a := startAPIServer(t)
	cfg := a.config()
	cfg.CAData = nil // trust only the system roots, which did not sign the test server
	p, err := Start(cfg)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	client, err := kubernetes.NewForConfig(p.ClientConfig(saToken))
	require.NoError(t, err)

	err = getPod(testContext(t), client, "ns", "p")
	var status apierrors.APIStatus
	require.ErrorAs(t, err, &status)
	require.EqualValues(t, http.StatusBadGateway, status.Status().Code)
	require.Contains(t, status.Status().Message, "certificate")
	require.Empty(t, a.authorizations())
}

func TestStatusIsAnAPIServerError(t *testing.T) {
	cases := []struct {
		code int
		is   func(error) bool
	}{
		{http.StatusTooManyRequests, apierrors.IsTooManyRequests},
		{http.StatusInternalServerError, apierrors.IsInternalError},
		{http.StatusServiceUnavailable, apierrors.IsServiceUnavailable},
		{http.StatusGatewayTimeout, apierrors.IsTimeout},
		{http.StatusConflict, apierrors.IsConflict},
	}
	a := startAPIServer(t)
	p, client := startProxy(t, a)
	ctx := testContext(t)
	for _, c := range cases {
		t.Run(fmt.Sprint(c.code), func(t *testing.T) {
			rule := &Rule{Match: Binding(), Times: 1, Fault: Status(c.code, 0)}
			defer p.Add(rule)()
			err := bind(ctx, client, "ns", "p")
			require.True(t, c.is(err), "%v", err)
			require.Equal(t, 1, rule.Hits())
		})
	}
	require.Empty(t, a.bindings(), "a Status fault never reaches the apiserver")
}

func TestStatusBodyAndRetryAfter(t *testing.T) {
	a := startAPIServer(t)
	p, _ := startProxy(t, a)
	defer p.Add(&Rule{Match: Any(), Fault: Status(http.StatusServiceUnavailable, 1500*time.Millisecond)})()

	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(p.CAData))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}
	resp, err := hc.Get(p.URL + "/api/v1/namespaces/ns/pods/p")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 1, resp.ProtoMajor, "HTTP/1.1 only, so that LoseAnswer cuts a connection")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "2", resp.Header.Get("Retry-After"), "whole seconds, rounded up")
	var st metav1.Status
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	require.Equal(t, "Status", st.Kind)
	require.Equal(t, metav1.StatusFailure, st.Status)
	require.Equal(t, metav1.StatusReasonServiceUnavailable, st.Reason)
	require.EqualValues(t, 503, st.Code)
	require.EqualValues(t, 2, st.Details.RetryAfterSeconds)
}

// client-go retries an answer with Retry-After by itself: the caller never sees the 429.
func TestClientGoRetriesRetryAfterByItself(t *testing.T) {
	a := startAPIServer(t)
	p, client := startProxy(t, a)
	rule := &Rule{Match: Binding(), Times: 1, Fault: Status(http.StatusTooManyRequests, time.Second)}
	defer p.Add(rule)()

	require.NoError(t, bind(testContext(t), client, "ns", "p"))
	require.Equal(t, 1, rule.Hits())
	require.Equal(t, []string{"ns/p"}, a.bindings())
}

func TestLoseAnswerAppliesTheRequestAndCutsTheConnection(t *testing.T) {
	a := startAPIServer(t)
	p, client := startProxy(t, a)
	ctx := testContext(t)
	rule := &Rule{Match: BindingOf("ns", "p"), Times: 1, Fault: LoseAnswer()}
	defer p.Add(rule)()

	err := bind(ctx, client, "ns", "p")
	require.Error(t, err)
	var status apierrors.APIStatus
	require.False(t, errors.As(err, &status), "the client got no answer at all, yet: %v", err)
	require.Equal(t, 1, rule.Hits())
	require.Equal(t, []string{"ns/p"}, a.bindings(), "the apiserver applied the binding")

	require.NoError(t, bind(ctx, client, "ns", "p"), "Times 1: the next binding is answered")
	require.Equal(t, []string{"ns/p", "ns/p"}, a.bindings())
}

func TestDelayForwardsLate(t *testing.T) {
	a := startAPIServer(t)
	p, client := startProxy(t, a)
	const d = 200 * time.Millisecond
	rule := &Rule{Match: Binding(), Fault: Delay(d)}
	defer p.Add(rule)()

	began := time.Now()
	require.NoError(t, bind(testContext(t), client, "ns", "p"))
	require.GreaterOrEqual(t, time.Since(began), d)
	require.Equal(t, []string{"ns/p"}, a.bindings())
}

// A request held by Delay or Hold whose client goes away never reaches the apiserver, not even
// when the hold is released afterwards.
func TestWaitingFaultsGiveUpWhenTheClientGoesAway(t *testing.T) {
	cases := []struct {
		name  string
		fault func() (Fault, func())
	}{
		{"delay", func() (Fault, func()) { return Delay(time.Hour), func() {} }},
		{"hold", Hold},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := startAPIServer(t)
			p, client := startProxy(t, a)
			fault, release := tc.fault()
			rule := &Rule{Match: Binding(), Fault: fault}
			defer p.Add(rule)()

			ctx, cancel := context.WithCancel(testContext(t))
			done := make(chan error, 1)
			go func() { done <- bind(ctx, client, "ns", "p") }()
			require.NoError(t, rule.WaitHits(testContext(t), 1))
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
			waitIdle(t, p)
			release()
			require.Empty(t, a.bindings())
		})
	}
}

func TestHoldForwardsOnRelease(t *testing.T) {
	a := startAPIServer(t)
	p, client := startProxy(t, a)
	ctx := testContext(t)
	hold, release := Hold()
	rule := &Rule{Match: Binding(), Fault: hold}
	defer p.Add(rule)()

	done := make(chan error, 1)
	go func() { done <- bind(ctx, client, "ns", "p") }()
	require.NoError(t, rule.WaitHits(ctx, 1))
	require.Empty(t, a.bindings(), "held, not forwarded")
	release()
	require.NoError(t, <-done)
	require.Equal(t, []string{"ns/p"}, a.bindings())

	require.NoError(t, bind(ctx, client, "ns", "q"), "after release requests pass at once")
	require.Equal(t, 2, rule.Hits())
}

func TestCloseDropsHeldRequests(t *testing.T) {
	a := startAPIServer(t)
	p, client := startProxy(t, a)
	hold, _ := Hold()
	rule := &Rule{Match: Binding(), Fault: hold}
	p.Add(rule)

	done := make(chan error, 1)
	go func() { done <- bind(testContext(t), client, "ns", "p") }()
	require.NoError(t, rule.WaitHits(testContext(t), 1))
	p.Close()
	require.Error(t, <-done, "the client sees the connection cut, not an empty 200")
	require.Empty(t, a.bindings())
}

func TestWatchStreamsEventByEvent(t *testing.T) {
	a := startAPIServer(t)
	p, err := Start(a.config())
	require.NoError(t, err)
	t.Cleanup(p.Close)
	client, err := kubernetes.NewForConfig(p.ClientConfig(saToken))
	require.NoError(t, err)
	ctx := testContext(t)

	w, err := client.CoreV1().Pods("ns").Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()
	next := func() string {
		select {
		case ev := <-w.ResultChan():
			return ev.Object.(*corev1.Pod).Name
		case <-ctx.Done():
			return "no event: " + ctx.Err().Error()
		}
	}
	require.Equal(t, "first", next(), "the first event arrives while the apiserver holds back the second")
	close(a.secondEvent)
	require.Equal(t, "second", next())
}

func TestTimesCountsDownAndRemoveStops(t *testing.T) {
	a := startAPIServer(t)
	p, client := startProxy(t, a)
	ctx := testContext(t)
	limited := &Rule{Match: Binding(), Times: 2, Fault: Status(http.StatusInternalServerError, 0)}
	removeLimited := p.Add(limited)
	counter := &Rule{Match: Binding()} // nil Fault: counts every binding, faulted or not
	removeCounter := p.Add(counter)

	for range 2 {
		err := bind(ctx, client, "ns", "p")
		require.True(t, apierrors.IsInternalError(err), "%v", err)
	}
	require.NoError(t, bind(ctx, client, "ns", "p"))
	require.Equal(t, 2, limited.Hits())
	require.Equal(t, 3, counter.Hits())

	always := &Rule{Match: BindingOf("ns", "x"), Fault: Status(http.StatusServiceUnavailable, 0)}
	removeAlways := p.Add(always)
	for range 3 {
		err := bind(ctx, client, "ns", "x")
		require.True(t, apierrors.IsServiceUnavailable(err), "%v", err)
	}
	removeAlways()
	removeAlways()
	removeLimited()
	removeCounter()
	require.NoError(t, bind(ctx, client, "ns", "x"))
	require.Equal(t, 3, always.Hits(), "a fault rule added after an observer still applies")
	require.Equal(t, 6, counter.Hits(), "removed rules count nothing")
	require.Equal(t, []string{"ns/p", "ns/x"}, a.bindings())
}

func TestTimesHoldsUnderConcurrency(t *testing.T) {
	a := startAPIServer(t)
	p, client := startProxy(t, a)
	ctx := testContext(t)
	rule := &Rule{Match: PodGet("ns", "p"), Times: 5, Fault: Status(http.StatusServiceUnavailable, 0)}
	defer p.Add(rule)()

	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for range 40 {
		wg.Go(func() {
			if err := getPod(ctx, client, "ns", "p"); err != nil {
				require.True(t, apierrors.IsServiceUnavailable(err), "%v", err)
				mu.Lock()
				failed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, 5, failed)
	require.Equal(t, 5, rule.Hits())
}

func TestWaitHitsEndsWithItsContext(t *testing.T) {
	rule := &Rule{Match: Any()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err := rule.WaitHits(ctx, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, rule.WaitHits(context.Background(), 0))
}

func TestAddRejectsMisuse(t *testing.T) {
	p := &Proxy{}
	rule := &Rule{Match: Any()}
	p.Add(rule)
	require.Panics(t, func() { p.Add(rule) })
	require.Panics(t, func() { p.Add(&Rule{}) })
}

func TestMatchers(t *testing.T) {
	req := func(method, path string) *http.Request {
		return httptest.NewRequest(method, "http://proxy"+path, nil)
	}
	bindP := req(http.MethodPost, "/api/v1/namespaces/ns/pods/gang-0/binding")
	getP := req(http.MethodGet, "/api/v1/namespaces/ns/pods/gang-0")
	cases := []struct {
		name  string
		match Matcher
		r     *http.Request
		want  bool
	}{
		{"binding", Binding(), bindP, true},
		{"binding: not a GET", Binding(), req(http.MethodGet, "/api/v1/namespaces/ns/pods/gang-0/binding"), false},
		{"binding: not the pod", Binding(), getP, false},
		{"binding: not the old bindings resource", Binding(), req(http.MethodPost, "/api/v1/namespaces/ns/bindings"), false},
		{"binding: not another subresource", Binding(), req(http.MethodPost, "/api/v1/namespaces/ns/pods/gang-0/eviction"), false},
		{"bindingOf", BindingOf("ns", "gang-"), bindP, true},
		{"bindingOf: other namespace", BindingOf("other", "gang-"), bindP, false},
		{"bindingOf: other prefix", BindingOf("ns", "solo"), bindP, false},
		{"bindingOf: any namespace", BindingOf("", "gang-0"), bindP, true},
		{"podGet", PodGet("ns", "gang-0"), getP, true},
		{"podGet: exact name", PodGet("ns", "gang-"), getP, false},
		{"podGet: not a list", PodGet("ns", "gang-0"), req(http.MethodGet, "/api/v1/namespaces/ns/pods?watch=true"), false},
		{"podGet: not the binding", PodGet("ns", "gang-0"), bindP, false},
		{"podGet: not a PATCH", PodGet("ns", "gang-0"), req(http.MethodPatch, "/api/v1/namespaces/ns/pods/gang-0"), false},
		{"any", Any(), req(http.MethodGet, "/version"), true},
	}
	for _, c := range cases {
		require.Equal(t, c.want, c.match(c.r), c.name)
	}
}
