package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// serverTLS loads the server certificate and key named by flags; both
// empty means plain TCP.
func serverTLS(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS key pair: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if tlsClientCA != "" {
		pem, err := os.ReadFile(tlsClientCA)
		if err != nil {
			return nil, fmt.Errorf("read --tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-client-ca %s holds no PEM certificate", tlsClientCA)
		}
		// A client may present a certificate signed by the CA; one that
		// a credential names is bound to it (auth add --cert-sha256).
		cfg.ClientAuth, cfg.ClientCAs = tls.VerifyClientCertIfGiven, pool
	}
	return cfg, nil
}

// tlsClientCA is the --tls-client-ca of the server command being run.
var tlsClientCA string

// withClientCert adds the client certificate of --tls-client-cert and
// --tls-client-key to cfg (TLS with the system's roots if cfg is nil).
func withClientCert(cfg *tls.Config, certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		return cfg, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("--tls-client-cert and --tls-client-key go together")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load the client certificate: %w", err)
	}
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	cfg.Certificates = []tls.Certificate{cert}
	return cfg, nil
}

// clientTLS builds the client's TLS configuration from --tls-ca and
// --tls-insecure; neither set means plain TCP.
func clientTLS(caFile string, insecure bool) (*tls.Config, error) {
	if caFile == "" && !insecure {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("read --tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s holds no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// addServerTLSFlags adds --tls-cert and --tls-key to a server command.
func addServerTLSFlags(cmd *cobra.Command, cert, key *string) {
	cmd.Flags().StringVar(cert, "tls-cert", "", "serve TLS with this certificate (PEM)")
	cmd.Flags().StringVar(key, "tls-key", "", "private key of --tls-cert (PEM)")
	cmd.Flags().StringVar(&tlsClientCA, "tls-client-ca", "", "with --tls-cert: verify the client certificates clients present against the CAs in this PEM file (mutual TLS; see auth add --cert-sha256)")
}
