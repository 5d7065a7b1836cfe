package faultproxy

import (
	"crypto/tls"
	"fmt"

	"github.com/lockstep-sched/lockstep/test/lib/testcerts"
)

// servingTLS is a TLS configuration for 127.0.0.1 with a fresh certificate, returned with the
// PEM of the CA that signed it for clients to trust. Only HTTP/1.1 is offered: a dropped answer
// (LoseAnswer) then closes the client's connection, as a broken network would, rather than
// resetting one HTTP/2 stream.
func servingTLS() (*tls.Config, []byte, error) {
	ca, err := testcerts.NewCA("lockstep-faultproxy-ca")
	if err != nil {
		return nil, nil, fmt.Errorf("faultproxy: CA: %w", err)
	}
	pair, err := ca.Server("lockstep-faultproxy")
	if err != nil {
		return nil, nil, fmt.Errorf("faultproxy: serving certificate: %w", err)
	}
	cert, err := pair.TLS()
	if err != nil {
		return nil, nil, fmt.Errorf("faultproxy: serving certificate: %w", err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	}
	return cfg, ca.CertPEM, nil
}
