// Package serving owns how lockstep faces the network: the addresses it listens on, TLS with a
// serving certificate and client CA re-read from their files when they change, which callers may
// call the scheduler's verbs, and the timeouts that keep slow or hostile clients from holding
// connections and memory. What is served is the extender package's business.
package serving

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// Config says how one listener serves.
type Config struct {
	// Name says what the listener is for, in logs and errors ("extender verbs", "debug").
	Name    string
	Addr    string
	Handler http.Handler
	// CertFile and KeyFile, both or neither, make the listener HTTPS.
	CertFile, KeyFile string
	// ClientCAFile asks clients for a certificate and verifies any they present against it;
	// VerifiedClient then tells the handler whether one did. The handshake itself does not
	// demand one, so that the kubelet's probes, which carry none, still reach /healthz.
	ClientCAFile string
	// ReloadInterval is how often the files are checked for change; 0 means DefaultReloadInterval.
	ReloadInterval time.Duration
	// ReadTimeout bounds reading one request, headers and body: a client that trickles its
	// request is cut off then. WriteTimeout bounds the rest of the call, answer included.
	ReadTimeout, WriteTimeout time.Duration
}

// DefaultReloadInterval: Kubernetes updates a mounted Secret within about a minute of its
// change, so a look every ten seconds adds little to a rotation and costs three small reads.
const DefaultReloadInterval = 10 * time.Second

// readHeaderTimeout cuts off a client that opens a connection and sends its headers slowly or
// not at all; every honest caller sends them in one packet.
const readHeaderTimeout = 5 * time.Second

// maxHeaderBytes: the scheduler's headers are a few hundred bytes; Go's default of 1 MiB per
// connection would let a thousand idle connections pin a gigabyte.
const maxHeaderBytes = 16 << 10

// idleTimeout closes keep-alive connections nobody uses: the scheduler reuses its own within
// milliseconds, and anything idle longer is holding a goroutine for nothing.
const idleTimeout = 90 * time.Second

// Server is one listener.
type Server struct {
	cfg   Config
	http  *http.Server
	certs *certFiles
}

// New checks the configuration and loads the certificate files, so that a bad file stops
// lockstep at start with a clear error rather than at the first handshake.
func New(cfg Config) (*Server, error) {
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		return nil, fmt.Errorf("%s: a TLS certificate needs both its certificate file and its private key file", cfg.Name)
	}
	if cfg.ClientCAFile != "" && cfg.CertFile == "" {
		return nil, fmt.Errorf("%s: a client CA needs TLS: give the serving certificate and key too", cfg.Name)
	}
	if cfg.ReloadInterval <= 0 {
		cfg.ReloadInterval = DefaultReloadInterval
	}
	s := &Server{cfg: cfg, http: &http.Server{
		Addr:              cfg.Addr,
		Handler:           cfg.Handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		// Failed handshakes and broken connections are the client's trouble; at -v=2 they show.
		ErrorLog: log.New(verboseWriter{}, "", 0),
	}}
	if cfg.CertFile != "" {
		certs, err := loadCertFiles(cfg.CertFile, cfg.KeyFile, cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Name, err)
		}
		s.certs = certs
		s.http.TLSConfig = certs.tlsConfig()
		// HTTP/1.1 only: its timeouts hold per connection as set above, and the scheduler's
		// client keeps a pool of connections to the extender anyway.
		s.http.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	return s, nil
}

// Run serves until ctx ends, then shuts down, letting calls in flight finish within grace.
func (s *Server) Run(ctx context.Context, grace time.Duration) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("%s: listening on %s: %w", s.cfg.Name, s.cfg.Addr, err)
	}
	return s.serve(ctx, ln, grace)
}

func (s *Server) serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() {
		klog.InfoS("lockstep listening", "for", s.cfg.Name, "address", ln.Addr().String(), "tls", s.certs != nil, "clientCA", s.cfg.ClientCAFile != "")
		var err error
		if s.certs != nil {
			err = s.http.ServeTLS(ln, "", "")
		} else {
			err = s.http.Serve(ln)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("%s: serving on %s: %w", s.cfg.Name, s.cfg.Addr, err)
		}
		close(errc)
	}()
	if s.certs != nil {
		go s.certs.watch(ctx, s.cfg.ReloadInterval)
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	return s.http.Shutdown(shutdown)
}

// VerifiedClient is nil when the request came over TLS with a client certificate that the
// listener's client CA signed: the handshake verified the chain, so only its presence is left
// to check.
func VerifiedClient(r *http.Request) error {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return errors.New("client certificate required: lockstep answers the scheduler's verbs only to a client whose certificate its --client-ca-file signed")
	}
	return nil
}

// IsLoopback reports whether a HOST:PORT address listens on loopback only: 127.0.0.0/8, ::1 or
// localhost. An empty host listens on every interface.
func IsLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// verboseWriter sends net/http's own complaints to klog at -v=2.
type verboseWriter struct{}

func (verboseWriter) Write(p []byte) (int, error) {
	klog.V(2).InfoS("HTTP server", "message", string(bytes.TrimSpace(p)))
	return len(p), nil
}
