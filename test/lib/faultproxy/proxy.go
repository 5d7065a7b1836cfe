// Package faultproxy is an HTTP proxy in front of a real kube-apiserver that injects faults into
// chosen requests, so that end-to-end tests can show lockstep binding correctly when the apiserver
// throttles, fails, answers late, or applies a request whose answer never arrives. A unit test
// with a fake clientset cannot show that: the faults must hit client-go's real transport, retry
// and decoding paths inside the lockstep process.
//
// The proxy listens on 127.0.0.1 and forwards to the apiserver over TLS, trusting the CA of the
// rest.Config it was started with. It adds no credentials of its own: the client's Authorization
// header passes through unchanged, so lockstep keeps acting as its ServiceAccount with only the
// shipped RBAC. Watches stream through event by event.
//
// Clients reach the proxy with HTTP/1.1 over TLS, with a certificate the proxy makes for itself
// (Proxy.CAData), not over plain HTTP: client-go's clientcmd ignores a kubeconfig's credentials
// when the server is not https, so a process loading its kubeconfig (as lockstep does) would call
// the apiserver anonymously. Proxy.Kubeconfig writes the matching kubeconfig.
//
// Faults are installed as rules (Add). Fault rules are tried in the order they were added; the
// first one whose matcher accepts the request and that has requests left (Rule.Times) takes it.
// Requests no rule takes are forwarded untouched. A rule with a nil Fault only observes: it counts
// every matching request, whatever fault rule takes it, so a test can count, say, how many
// bindings lockstep sent in all while some of them failed.
//
// Things client-go does by itself, which decide what a test sees:
//
//   - client-go retries a 429 or 5xx answer that carries a Retry-After header, on its own and up
//     to 10 times, for every verb, before the caller sees an error. Give Status a retryAfter of 0
//     (no header) when lockstep's own retry logic is meant to see the error.
//   - client-go retries a GET whose connection broke (EOF, reset), and Go's http.Transport
//     silently resends an idempotent request (GET, HEAD) whose answer was lost on a reused
//     connection. LoseAnswer is therefore meant for writes such as POST pods/binding, which
//     neither retries.
package faultproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Proxy is a running fault-injecting proxy. Its methods are safe for concurrent use.
type Proxy struct {
	// URL is https://127.0.0.1:<port>, the address clients use instead of the apiserver's.
	URL string
	// CAData is the PEM certificate clients must trust to reach URL.
	CAData []byte

	target    *url.URL
	transport *http.Transport
	forwarder *httputil.ReverseProxy
	server    *http.Server

	// ctx ends when Close is called, cutting short held requests and upstream calls.
	ctx    context.Context
	cancel context.CancelFunc
	// handlers counts requests being served, so that Close returns only when none is left.
	handlers sync.WaitGroup

	mu     sync.Mutex
	closed bool
	rules  []*Rule
}

// Start listens on a free loopback port and forwards to target's apiserver (target.Host), checking
// its certificate with target's TLS settings (CAData). target's credentials are not used.
func Start(target *rest.Config) (*Proxy, error) {
	p, err := newProxy(target)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p.URL = "https://" + l.Addr().String()
	go func() { _ = p.server.ServeTLS(l, "", "") }()
	return p, nil
}

func newProxy(target *rest.Config) (*Proxy, error) {
	u, err := url.Parse(target.Host)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: apiserver address %q is not a URL", target.Host)
	}
	tlsConfig, err := rest.TLSConfigFor(target)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: TLS settings for %s: %w", target.Host, err)
	}
	p := &Proxy{
		target: u,
		transport: &http.Transport{
			TLSClientConfig:   tlsConfig,
			ForceAttemptHTTP2: true,
			// Every informer of the client holds a watch open through here.
			MaxIdleConnsPerHost: 50,
			TLSHandshakeTimeout: 10 * time.Second,
		},
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.forwarder = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// Authorization and every other end-to-end header stay as the client sent them.
			pr.SetURL(p.target)
		},
		Transport: p.transport,
		// Watches must reach the client event by event, not when a buffer fills.
		FlushInterval: -1,
		ErrorHandler:  p.upstreamError,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	serving, ca, err := servingTLS()
	if err != nil {
		return nil, err
	}
	p.CAData = ca
	var http1 http.Protocols
	http1.SetHTTP1(true) // see servingTLS
	p.server = &http.Server{
		Handler:           p,
		TLSConfig:         serving,
		Protocols:         &http1,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	return p, nil
}

// ClientConfig is a rest.Config that reaches the apiserver through the proxy with a bearer token.
func (p *Proxy) ClientConfig(bearerToken string) *rest.Config {
	return &rest.Config{Host: p.URL, BearerToken: bearerToken, TLSClientConfig: rest.TLSClientConfig{CAData: p.CAData}}
}

// Kubeconfig is a kubeconfig for user, who reaches the apiserver through the proxy with a bearer
// token; write it with clientcmd.WriteToFile.
func (p *Proxy) Kubeconfig(user, bearerToken string) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["faultproxy"] = &clientcmdapi.Cluster{Server: p.URL, CertificateAuthorityData: p.CAData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: bearerToken}
	cfg.Contexts[user] = &clientcmdapi.Context{Cluster: "faultproxy", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = user
	return cfg
}

// Close stops listening, drops every held request, cancels the upstream calls in flight and
// returns once no request is being served any more. Calling it again does nothing.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	_ = p.server.Close()
	p.handlers.Wait()
	p.transport.CloseIdleConnections()
}

// ServeHTTP gives the request to the first rule that takes it, or forwards it.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.enter() {
		panic(http.ErrAbortHandler)
	}
	defer p.handlers.Done()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(p.ctx, cancel)()
	r = r.WithContext(ctx)

	if rule := p.claim(r); rule != nil {
		rule.Fault.apply(p, rule, w, r)
		return
	}
	p.forward(w, r)
}

// enter counts a request in, unless Close has begun (it may be waiting for the count to drop).
func (p *Proxy) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.handlers.Add(1)
	return true
}

// claim counts r on every observing rule that matches it and returns the first fault rule that
// matches r and has requests left, having counted r against it.
func (p *Proxy) claim(r *http.Request) *Rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	var taken *Rule
	for _, rule := range p.rules {
		if rule.Fault != nil && taken != nil {
			continue // one fault per request; observers further on still count it
		}
		if !rule.Match(r) || !rule.take() {
			continue
		}
		if rule.Fault == nil {
			rule.hit()
			continue
		}
		taken = rule
	}
	return taken
}

// forward sends r upstream and copies the answer to w.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	p.forwarder.ServeHTTP(w, r)
}

// upstreamError answers a request the apiserver could not be asked, with a Status so that client-go
// reports what went wrong. A client that went away gets nothing.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if d, ok := w.(*discardWriter); ok {
		d.err = err
		return
	}
	if r.Context().Err() != nil {
		return
	}
	writeStatus(w, http.StatusBadGateway, 0, fmt.Sprintf("faultproxy: forwarding %s %s: %v", r.Method, r.URL.Path, err))
}

// writeStatus answers as kube-apiserver does when it fails a request: a metav1.Status, with the
// reason client-go's apierrors predicates (IsTooManyRequests, IsServiceUnavailable...) look for.
func writeStatus(w http.ResponseWriter, code int, retryAfterSeconds int, message string) {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  message,
		Reason:   reasonFor(code),
		Code:     int32(code),
	}
	if retryAfterSeconds > 0 {
		st.Details = &metav1.StatusDetails{RetryAfterSeconds: int32(retryAfterSeconds)}
		w.Header().Set("Retry-After", fmt.Sprint(retryAfterSeconds))
	}
	body, err := json.Marshal(st)
	if err != nil {
		panic(err) // a Status always marshals
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// reasonFor is the StatusReason kube-apiserver gives with an HTTP code.
func reasonFor(code int) metav1.StatusReason {
	switch code {
	case http.StatusBadRequest:
		return metav1.StatusReasonBadRequest
	case http.StatusUnauthorized:
		return metav1.StatusReasonUnauthorized
	case http.StatusForbidden:
		return metav1.StatusReasonForbidden
	case http.StatusNotFound:
		return metav1.StatusReasonNotFound
	case http.StatusConflict:
		return metav1.StatusReasonConflict
	case http.StatusGone:
		return metav1.StatusReasonGone
	case http.StatusUnprocessableEntity:
		return metav1.StatusReasonInvalid
	case http.StatusTooManyRequests:
		return metav1.StatusReasonTooManyRequests
	case http.StatusInternalServerError:
		return metav1.StatusReasonInternalError
	case http.StatusServiceUnavailable:
		return metav1.StatusReasonServiceUnavailable
	case http.StatusGatewayTimeout:
		return metav1.StatusReasonTimeout
	}
	return metav1.StatusReasonUnknown
}

// discardWriter takes an upstream answer nobody will read; err is set when none came.
type discardWriter struct {
	header http.Header
	err    error
}

func (d *discardWriter) Header() http.Header {
	if d.header == nil {
		d.header = http.Header{}
	}
	return d.header
}

func (d *discardWriter) WriteHeader(int) {}

func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }

func (d *discardWriter) Flush() {}
