package inspect

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	streamhttp "k8s.io/streaming/pkg/httpstream"
)

// Fetcher GETs a path of lockstep's debug address.
type Fetcher interface {
	Get(ctx context.Context, path string) ([]byte, error)
}

// Tunnel is one port-forward through the apiserver to lockstep's debug port: each GET is a
// stream pair of its own on one upgraded connection, as `kubectl port-forward` makes for each
// local connection, but without a local listener anyone on this machine could use.
type Tunnel struct {
	target Target
	conn   streamhttp.Connection
	nextID atomic.Int64
}

// UnreachableError says why the apiserver would not forward to the lockstep pod.
type UnreachableError struct {
	Target Target
	// Why is the sentence a person acts on.
	Why string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach lockstep in pod %s (port %d): %s: %v", e.Target.Name(), e.Target.Port, e.Why, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// AnswerError is lockstep answering a debug GET with something other than 200.
type AnswerError struct {
	Path    string
	Status  int
	Message string
}

func (e *AnswerError) Error() string {
	return fmt.Sprintf("lockstep answered %d %s to GET %s: %s", e.Status, http.StatusText(e.Status), e.Path, e.Message)
}

// Open port-forwards to the target through the apiserver: over WebSockets first, as kubectl does
// since 1.31, then SPDY for an apiserver that does not tunnel. The apiserver authorizes
// pods/portforward on the lockstep pod, so RBAC decides who reads lockstep's debug pages.
func Open(cfg *rest.Config, target Target) (*Tunnel, error) {
	if target.Pod.Status.Phase != corev1.PodRunning {
		return nil, &UnreachableError{Target: target, Why: "the pod is not running",
			Err: fmt.Errorf("its phase is %s; port-forward reaches running pods only", target.Pod.Status.Phase)}
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	url := client.CoreV1().RESTClient().Post().Resource("pods").Namespace(target.Pod.Namespace).
		Name(target.Pod.Name).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	spdyDialer := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	wsDialer, err := portforward.NewSPDYOverWebsocketDialerForStreaming(url, cfg)
	if err != nil {
		return nil, err
	}
	dialer := portforward.NewFallbackDialerForStreaming(wsDialer, spdyDialer, shouldFallBack)
	conn, protocol, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return nil, dialError(target, err)
	}
	if protocol != portforward.PortForwardProtocolV1Name {
		conn.Close()
		return nil, &UnreachableError{Target: target, Why: "the apiserver speaks another port-forward protocol",
			Err: fmt.Errorf("asked %q, got %q", portforward.PortForwardProtocolV1Name, protocol)}
	}
	return &Tunnel{target: target, conn: conn}, nil
}

// shouldFallBack tries SPDY when the WebSocket upgrade failed for want of support, but not when
// the apiserver refused the request itself: SPDY would get the same refusal in vaguer words.
func shouldFallBack(err error) bool {
	if status := apiStatus(err); status != nil {
		switch status.ErrStatus.Code {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
			return false
		}
	}
	return streamhttp.IsUpgradeFailure(err) || streamhttp.IsHTTPSProxyError(err)
}

// apiStatus is the apiserver's Status inside a failed WebSocket upgrade, if it sent one.
func apiStatus(err error) *apierrors.StatusError {
	var status *apierrors.StatusError
	if errors.As(err, &status) {
		return status
	}
	var upgrade *streamhttp.UpgradeFailureError
	if errors.As(err, &upgrade) && errors.As(upgrade.Cause, &status) {
		return status
	}
	return nil
}

// dialError turns a refused port-forward into what to do about it. The SPDY path carries the
// apiserver's words but not its status code, hence the look at the words.
func dialError(target Target, err error) error {
	code := int32(0)
	if status := apiStatus(err); status != nil {
		code = status.ErrStatus.Code
	}
	msg := err.Error()
	switch {
	case code == http.StatusForbidden || strings.Contains(msg, "forbidden"):
		return &UnreachableError{Target: target, Err: err, Why: fmt.Sprintf(
			"RBAC forbids it (403): you need create and get on pods/portforward in namespace %s (see docs/kubectl-plugin.md)", target.Pod.Namespace)}
	case code == http.StatusUnauthorized || strings.Contains(msg, "Unauthorized"):
		return &UnreachableError{Target: target, Err: err, Why: "the apiserver did not accept your credentials (401): log in again"}
	case code == http.StatusNotFound || strings.Contains(msg, "not found"):
		return &UnreachableError{Target: target, Err: err, Why: "the pod is gone (404): it was deleted or replaced; run the command again"}
	case strings.Contains(msg, "does not have a host assigned"):
		return &UnreachableError{Target: target, Err: err, Why: "the pod is not scheduled to a node yet"}
	case strings.Contains(msg, "dialing backend") || strings.Contains(msg, "kubelet"):
		return &UnreachableError{Target: target, Err: err, Why: fmt.Sprintf(
			"the apiserver could not reach the kubelet of node %s, which does the forwarding", target.Pod.Spec.NodeName)}
	}
	return &UnreachableError{Target: target, Err: err, Why: "the port-forward through the apiserver failed"}
}

// Close ends the port-forward.
func (t *Tunnel) Close() error { return t.conn.Close() }

// Get asks lockstep for path over a new stream pair and returns the body of a 200 answer.
func (t *Tunnel) Get(ctx context.Context, path string) ([]byte, error) {
	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(t.target.Port))
	headers.Set(corev1.PortForwardRequestIDHeader, strconv.FormatInt(t.nextID.Add(1), 10))
	errStream, err := t.conn.CreateStream(headers)
	if err != nil {
		return nil, t.lost(err)
	}
	// Only the far side writes the error stream.
	errStream.Close()
	remoteErr := make(chan string, 1)
	go func() {
		msg, _ := io.ReadAll(errStream)
		remoteErr <- strings.TrimSpace(string(msg))
	}()
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := t.conn.CreateStream(headers)
	if err != nil {
		return nil, t.lost(err)
	}
	defer t.conn.RemoveStreams(errStream, data)
	stop := context.AfterFunc(ctx, func() { _ = data.Reset() })
	defer stop()
	body, status, err := exchange(data, path)
	if err != nil {
		return nil, t.streamError(ctx, err, remoteErr)
	}
	if status != http.StatusOK {
		return nil, &AnswerError{Path: path, Status: status, Message: errorMessage(body)}
	}
	return body, nil
}

// exchange writes one GET on the stream and reads the answer whole.
func exchange(stream streamhttp.Stream, path string) ([]byte, int, error) {
	defer stream.Reset()
	req, err := http.NewRequest(http.MethodGet, "http://localhost"+path, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Close = true
	if err := req.Write(stream); err != nil {
		return nil, 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(stream), req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return body, resp.StatusCode, err
}

// streamError prefers the far side's words (the kubelet's "connection refused" when lockstep
// does not listen there) to the local read error they caused.
func (t *Tunnel) streamError(ctx context.Context, err error, remote <-chan string) error {
	if ctx.Err() != nil {
		return fmt.Errorf("reading lockstep's debug port in pod %s: %w", t.target.Name(), ctx.Err())
	}
	select {
	case msg := <-remote:
		if msg != "" {
			return &UnreachableError{Target: t.target, Err: errors.New(msg), Why: fmt.Sprintf(
				"nothing answered on port %d inside the pod: lockstep is not running there, or its --debug-listen is another port (--debug-port)", t.target.Port)}
		}
	case <-time.After(5 * time.Second):
	}
	return &UnreachableError{Target: t.target, Err: err, Why: "the forwarded connection broke"}
}

func (t *Tunnel) lost(err error) error {
	return &UnreachableError{Target: t.target, Err: err, Why: "the port-forward connection was lost"}
}

// errorMessage is lockstep's {"error": "..."} answer, or the body as it came.
func errorMessage(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	return strings.TrimSpace(string(body))
}
