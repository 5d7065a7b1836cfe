package faultproxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Fault is what happens to a request a rule takes. The faults are Status, LoseAnswer, Delay and
// Hold.
type Fault interface {
	// apply serves r and calls rule.hit once the fault has taken effect.
	apply(p *Proxy, rule *Rule, w http.ResponseWriter, r *http.Request)
}

// Status answers with a kube-apiserver style metav1.Status error of the HTTP code (429, 500, 503,
// 504...) without forwarding the request, so the apiserver never sees it. A retryAfter above 0 is
// sent as Retry-After (whole seconds, rounded up) and in the Status details; client-go then retries
// by itself (see the package doc). A hit counts once the answer is written.
func Status(code int, retryAfter time.Duration) Fault {
	return statusFault{code: code, retryAfter: retryAfter}
}

type statusFault struct {
	code       int
	retryAfter time.Duration
}

func (f statusFault) apply(_ *Proxy, rule *Rule, w http.ResponseWriter, r *http.Request) {
	seconds := int((f.retryAfter + time.Second - 1) / time.Second)
	writeStatus(w, f.code, seconds, fmt.Sprintf("faultproxy: injected %d %s for %s %s",
		f.code, http.StatusText(f.code), r.Method, r.URL.Path))
	rule.hit()
}

// LoseAnswer forwards the request, lets the apiserver apply it and answer, and then drops the
// answer: the client's connection is cut without a byte of response, so it sees EOF or a reset and
// cannot tell whether the request took effect. A hit counts once the apiserver's whole answer has
// arrived, so after WaitHits the request is applied (if the apiserver accepted it). If the
// apiserver cannot be reached, the client gets a 502 and the rule keeps the request for the next
// match.
func LoseAnswer() Fault { return loseAnswer{} }

type loseAnswer struct{}

func (loseAnswer) apply(p *Proxy, rule *Rule, w http.ResponseWriter, r *http.Request) {
	var upstream discardWriter
	p.forward(&upstream, r) // returns after the whole answer was read
	if upstream.err != nil {
		rule.giveBack()
		p.upstreamError(w, r, upstream.err)
		return
	}
	rule.hit()
	// The server closes the connection without answering, and does not log this panic.
	panic(http.ErrAbortHandler)
}

// Delay holds the request for d and then forwards it, unless the client went away meanwhile, in
// which case the apiserver never sees it. A hit counts when the wait begins.
func Delay(d time.Duration) Fault { return delayFault{d: d} }

type delayFault struct{ d time.Duration }

func (f delayFault) apply(p *Proxy, rule *Rule, w http.ResponseWriter, r *http.Request) {
	elapsed := make(chan struct{})
	t := time.AfterFunc(f.d, func() { close(elapsed) })
	defer t.Stop()
	holdThenForward(p, rule, w, r, elapsed)
}

// Hold holds every request it takes until release is called, then forwards those whose client
// is still there; requests it takes after release pass at once. A client that goes away while held
// never reaches the apiserver. A hit counts when the wait begins, so WaitHits tells a test that a
// request is being held. Removing the rule does not release what it holds; Proxy.Close drops it.
func Hold() (fault Fault, release func()) {
	h := &holdFault{released: make(chan struct{})}
	var once sync.Once
	return h, func() { once.Do(func() { close(h.released) }) }
}

type holdFault struct{ released chan struct{} }

func (h *holdFault) apply(p *Proxy, rule *Rule, w http.ResponseWriter, r *http.Request) {
	holdThenForward(p, rule, w, r, h.released)
}

// holdThenForward waits until proceed is closed, then forwards r. It gives up, cutting the connection, when the
// client goes away or the proxy closes first.
func holdThenForward(p *Proxy, rule *Rule, w http.ResponseWriter, r *http.Request, proceed <-chan struct{}) {
	if err := bufferBody(r); err != nil {
		panic(http.ErrAbortHandler)
	}
	rule.hit()
	select {
	case <-proceed:
	case <-r.Context().Done():
	}
	if r.Context().Err() != nil {
		// Returning normally would send an empty 200 to a client that might still be there.
		panic(http.ErrAbortHandler)
	}
	p.forward(w, r)
}

// bufferBody reads r's body into memory. net/http notices that an HTTP/1.1 client went away (and
// cancels r's context) only once the request body has been read, which forwarding would otherwise
// do only after the wait.
func bufferBody(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}
