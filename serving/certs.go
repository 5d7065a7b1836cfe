package serving

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// certFiles is a serving certificate and an optional client CA, read from files and read again
// when their contents change, so that a rotated certificate is served without a restart.
// Contents, not modification times, decide: a Kubernetes Secret volume swaps a symlink, and a
// file rewritten within the same second keeps its time.
type certFiles struct {
	certFile, keyFile, caFile string
	current                   atomic.Pointer[loadedCerts]
	// brokenSum is the contents last found unusable, so that a broken rotation is logged once
	// rather than at every look.
	brokenSum [sha256.Size]byte
}

type loadedCerts struct {
	sum       [sha256.Size]byte
	cert      *tls.Certificate
	clientCAs *x509.CertPool // nil: no client CA
}

func loadCertFiles(certFile, keyFile, caFile string) (*certFiles, error) {
	c := &certFiles{certFile: certFile, keyFile: keyFile, caFile: caFile}
	l, err := c.read()
	if err != nil {
		return nil, err
	}
	c.current.Store(l)
	return c, nil
}

// read loads all three files. A rotation that has written some of them but not all yet fails
// here (the key does not match the certificate) and is picked up at the next look.
func (c *certFiles) read() (*loadedCerts, error) {
	contents, sum, err := c.readFiles()
	if err != nil {
		return nil, err
	}
	return c.parse(contents, sum)
}

func (c *certFiles) readFiles() ([][]byte, [sha256.Size]byte, error) {
	files := []string{c.certFile, c.keyFile, c.caFile}
	contents := make([][]byte, len(files))
	for i, f := range files {
		if f == "" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, [sha256.Size]byte{}, err
		}
		contents[i] = b
	}
	return contents, sha256.Sum256(bytes.Join(contents, []byte{0})), nil
}

// parse makes the files' contents, as readFiles returned them, into what a handshake serves.
func (c *certFiles) parse(contents [][]byte, sum [sha256.Size]byte) (*loadedCerts, error) {
	l := &loadedCerts{sum: sum}
	cert, err := tls.X509KeyPair(contents[0], contents[1])
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s with key %s: %w", c.certFile, c.keyFile, err)
	}
	l.cert = &cert
	if c.caFile != "" {
		l.clientCAs = x509.NewCertPool()
		if !l.clientCAs.AppendCertsFromPEM(contents[2]) {
			return nil, fmt.Errorf("client CA file %s holds no PEM certificate", c.caFile)
		}
	}
	return l, nil
}

// reload swaps in the files' new contents, if they changed and are whole; a broken rotation
// keeps the last good certificate served.
func (c *certFiles) reload() {
	contents, sum, err := c.readFiles()
	if err == nil && (sum == c.current.Load().sum || sum == c.brokenSum) {
		return
	}
	var l *loadedCerts
	if err == nil {
		l, err = c.parse(contents, sum)
		if err != nil {
			c.brokenSum = sum
		}
	}
	if err != nil {
		klog.ErrorS(err, "Reloading TLS files failed; serving the last good ones", "cert", c.certFile, "clientCA", c.caFile)
		return
	}
	c.current.Store(l)
	klog.InfoS("Reloaded TLS files", "cert", c.certFile, "clientCA", c.caFile, "notAfter", l.cert.Leaf.NotAfter)
}

func (c *certFiles) watch(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.reload()
		}
	}
}

// tlsConfig hands each handshake the certificate and client CA current at that moment.
func (c *certFiles) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			l := c.current.Load()
			cfg := &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*l.cert},
				NextProtos:   []string{"http/1.1"},
			}
			if l.clientCAs != nil {
				cfg.ClientCAs, cfg.ClientAuth = l.clientCAs, tls.VerifyClientCertIfGiven
			}
			return cfg, nil
		},
	}
}
