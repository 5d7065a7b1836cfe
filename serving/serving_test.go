package serving

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lockstep-sched/lockstep/test/lib/testcerts"
)

// pki is a CA with a serving certificate and a client certificate it signed, written to dir.
type pki struct {
	ca                        *testcerts.CA
	client                    testcerts.Pair
	certFile, keyFile, caFile string
}

func newPKI(t *testing.T, dir, name string) pki {
	t.Helper()
	ca, err := testcerts.NewCA(name)
	require.NoError(t, err)
	server, err := ca.Server("lockstep")
	require.NoError(t, err)
	client, err := ca.Client("kube-scheduler")
	require.NoError(t, err)
	p := pki{ca: ca, client: client}
	p.certFile, p.keyFile, err = server.Write(dir, "tls")
	require.NoError(t, err)
	p.caFile, err = ca.WriteCert(dir, "ca")
	require.NoError(t, err)
	return p
}

// start serves cfg on a free loopback port until the test ends; the handler says whether the
// caller presented a verified client certificate.
func start(t *testing.T, cfg Config) string {
	t.Helper()
	cfg.Name = "test"
	cfg.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := VerifiedClient(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	})
	s, err := New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.serve(ctx, ln, time.Second) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return "https://" + ln.Addr().String()
}

// call makes one request with a fresh connection, trusting ca and presenting client if given.
func call(url string, ca *testcerts.CA, client *testcerts.Pair) (int, string, error) {
	cfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if client != nil {
		cert, err := client.TLS()
		if err != nil {
			return 0, "", err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	resp, err := hc.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func TestClientCertificates(t *testing.T) {
	dir := t.TempDir()
	p := newPKI(t, dir, "lockstep-ca")
	url := start(t, Config{CertFile: p.certFile, KeyFile: p.keyFile, ClientCAFile: p.caFile})

	code, body, err := call(url, p.ca, &p.client)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "kube-scheduler", body)

	// No certificate: the handshake succeeds (probes carry none), the handler refuses.
	code, body, err = call(url, p.ca, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, code)
	require.Contains(t, body, "client certificate required")

	// A certificate some other CA signed gets nowhere (Go's client does not even send it).
	other := newPKI(t, t.TempDir(), "someone-else")
	require.True(t, refused(url, p.ca, &other.client))
}

// refused: the handshake failed, or the handler found no verified client certificate.
func refused(url string, ca *testcerts.CA, client *testcerts.Pair) bool {
	code, _, err := call(url, ca, client)
	return err != nil || code == http.StatusForbidden
}

// A rotated certificate and client CA are served without a restart; a rotation caught half
// written keeps the last good files served.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	old := newPKI(t, dir, "old-ca")
	url := start(t, Config{CertFile: old.certFile, KeyFile: old.keyFile, ClientCAFile: old.caFile, ReloadInterval: 20 * time.Millisecond})
	code, _, err := call(url, old.ca, &old.client)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)

	// Half a rotation: a new certificate beside the old key does not load.
	fresh := newPKI(t, t.TempDir(), "new-ca")
	crt, err := os.ReadFile(fresh.certFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(old.certFile, crt, 0o600))
	require.Never(t, func() bool {
		_, _, err := call(url, old.ca, &old.client)
		return err != nil
	}, 300*time.Millisecond, 20*time.Millisecond, "the last good certificate stays served")

	// The rest of the rotation lands: the new CA's clients get in, the old CA's no longer do.
	for _, f := range []string{"tls.key", "ca.crt"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(fresh.certFile), f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o600))
	}
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		code, _, err := call(url, fresh.ca, &fresh.client)
		return err == nil && code == http.StatusOK, nil
	})
	require.NoError(t, err, "the rotated certificate is served")
	require.True(t, refused(url, fresh.ca, &old.client), "a client of the old CA is refused once the client CA rotated")
}

func TestNewRefusesHalfConfigurations(t *testing.T) {
	dir := t.TempDir()
	p := newPKI(t, dir, "ca")
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"certificate without key": {Config{CertFile: p.certFile}, "both its certificate file and its private key file"},
		"client CA without TLS":   {Config{ClientCAFile: p.caFile}, "a client CA needs TLS"},
		"missing file":            {Config{CertFile: filepath.Join(dir, "nope.crt"), KeyFile: p.keyFile}, "nope.crt"},
		"key of another cert":     {Config{CertFile: p.certFile, KeyFile: p.caFile}, "with key"},
		"CA file without a cert":  {Config{CertFile: p.certFile, KeyFile: p.keyFile, ClientCAFile: p.keyFile}, "holds no PEM certificate"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.cfg.Name = "extender verbs"
			_, err := New(tc.cfg)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "extender verbs")
		})
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8888": true, "127.1.2.3:1": true, "[::1]:8888": true, "localhost:8888": true,
		":8888": false, "0.0.0.0:8888": false, "[::]:8888": false, "10.0.0.1:8888": false, "example.com:80": false,
	} {
		got, err := IsLoopback(addr)
		require.NoError(t, err, addr)
		require.Equal(t, want, got, addr)
	}
	_, err := IsLoopback("8888")
	require.Error(t, err)
}
