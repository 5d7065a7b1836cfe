// Package nodeproxy stands in for the one part of a node's kubelet that `kubectl port-forward`
// reaches: /portForward/{namespace}/{pod} over HTTPS, speaking the kubelet's SPDY port-forward
// protocol (k8s.io/cri-streaming, the kubelet's own server side). The test control plane runs no
// kubelet; a Node registered with Kubelet.Register points the apiserver here, so that
// pods/portforward to a pod on that node goes through the apiserver (authentication, RBAC and
// all) and ends at a local address the test chose for that pod's port.
//
// It forwards only what a test mapped with Forward, and it serves nothing else a kubelet serves.
package nodeproxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
)

// Timeouts of the streams, as the kubelet's defaults would be for an interactive session.
const (
	streamIdleTimeout     = 4 * time.Hour
	streamCreationTimeout = 30 * time.Second
)

// Kubelet serves the port-forward endpoint. kube-apiserver started without
// --kubelet-certificate-authority does not verify a kubelet's serving certificate, so a
// self-signed one does.
type Kubelet struct {
	server *httptest.Server
	// Host and Port are where the apiserver reaches it: the Node's InternalIP and kubelet port.
	Host string
	Port int32

	mu    sync.Mutex
	ports map[string]map[int32]string // namespace/pod -> pod port -> local address
}

// Start serves on a free port of 127.0.0.1 until Close.
func Start() (*Kubelet, error) {
	k := &Kubelet{ports: map[string]map[int32]string{}}
	k.server = httptest.NewTLSServer(http.HandlerFunc(k.serve))
	host, port, err := net.SplitHostPort(k.server.Listener.Addr().String())
	if err != nil {
		k.server.Close()
		return nil, err
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		k.server.Close()
		return nil, err
	}
	k.Host, k.Port = host, int32(n)
	return k, nil
}

// Close stops serving.
func (k *Kubelet) Close() { k.server.Close() }

// Forward makes the pod's port lead to addr (host:port on this machine), as the pod's network
// namespace would lead it to a process listening there.
func (k *Kubelet) Forward(namespace, pod string, port int32, addr string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := namespace + "/" + pod
	if k.ports[key] == nil {
		k.ports[key] = map[int32]string{}
	}
	k.ports[key][port] = addr
}

// Register creates a cordoned Node whose status sends the apiserver's kubelet connections here:
// its only address the InternalIP Host, its kubelet endpoint Port. It has no allocatable, so
// nothing schedules there; tests bind the pods they need to it directly.
func (k *Kubelet) Register(ctx context.Context, client kubernetes.Interface, name string) (*corev1.Node, error) {
	node, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Spec:       corev1.NodeSpec{Unschedulable: true},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("nodeproxy: creating node %s: %w", name, err)
	}
	now := metav1.Now()
	node.Status = corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: k.Host}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: k.Port}},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "nodeproxy: only port-forward is served", LastHeartbeatTime: now, LastTransitionTime: now}},
	}
	node, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("nodeproxy: setting the status of node %s: %w", name, err)
	}
	return node, nil
}

// serve answers /portForward/{namespace}/{pod}[/{uid}] as the kubelet does, 404 for a pod it
// does not forward for.
func (k *Kubelet) serve(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if len(parts) < 3 || parts[0] != "portForward" {
		http.Error(w, "nodeproxy serves /portForward/{namespace}/{pod} only", http.StatusNotFound)
		return
	}
	key := parts[1] + "/" + parts[2]
	if !k.knows(key) {
		http.Error(w, "pod does not exist", http.StatusNotFound)
		return
	}
	uid := ""
	if len(parts) > 3 {
		uid = parts[3]
	}
	portforward.ServePortForward(w, r, forwarder{k: k, pod: key}, parts[2], uid, &portforward.V4Options{},
		streamIdleTimeout, streamCreationTimeout, []string{portforward.ProtocolV1Name})
}

func (k *Kubelet) knows(pod string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ports[pod] != nil
}

func (k *Kubelet) addr(pod string, port int32) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ports[pod][port]
}

// forwarder connects one stream to the address mapped for a pod's port.
type forwarder struct {
	k   *Kubelet
	pod string
}

// PortForward copies between the stream and the mapped address until either side ends. Its
// error reaches the client on the error stream, worded as the container runtime words it.
func (f forwarder) PortForward(ctx context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	addr := f.k.addr(f.pod, port)
	if addr == "" {
		return fmt.Errorf("failed to connect to localhost:%d inside pod %s: connect: connection refused", port, f.pod)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("failed to connect to localhost:%d inside pod %s: %w", port, f.pod, err)
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(conn, stream); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stream, conn); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}
