package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// serviceCIDR is the Service cluster IP range (kube-apiserver
// --service-cluster-ip-range); the first address is the "kubernetes"
// Service's, which the serving certificate names.
const (
	serviceCIDR     = "10.96.0.0/12"
	kubernetesSvcIP = "10.96.0.1"
	certValidity    = 365 * 24 * time.Hour
)

// pki holds the file paths of the cluster's keys and certificates.
type pki struct {
	CACert, CAKey           string // cluster CA (PEM)
	ServingCert, ServingKey string // serving certificate of kube-apiserver, kube-controller-manager and kube-scheduler
	SAKey, SAPub            string // service-account token signing key pair
}

// writePKI creates a CA, a serving certificate for 127.0.0.1 and the
// in-cluster names of the kubernetes Service, and an ECDSA P-256
// service-account signing key, under dir. now sets the validity window.
func writePKI(dir string, now time.Time) (pki, error) {
	p := pki{
		CACert:      filepath.Join(dir, "ca.crt"),
		CAKey:       filepath.Join(dir, "ca.key"),
		ServingCert: filepath.Join(dir, "serving.crt"),
		ServingKey:  filepath.Join(dir, "serving.key"),
		SAKey:       filepath.Join(dir, "sa.key"),
		SAPub:       filepath.Join(dir, "sa.pub"),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return pki{}, fmt.Errorf("pki dir: %w", err)
	}

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return pki{}, fmt.Errorf("ca key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "nodewright-local-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return pki{}, fmt.Errorf("ca certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return pki{}, fmt.Errorf("ca certificate: %w", err)
	}

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return pki{}, fmt.Errorf("serving key: %w", err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{
			"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local",
		},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(kubernetesSvcIP)},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return pki{}, fmt.Errorf("serving certificate: %w", err)
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return pki{}, fmt.Errorf("service-account key: %w", err)
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return pki{}, fmt.Errorf("service-account public key: %w", err)
	}

	files := []struct {
		path, typ string
		der       []byte
		key       *ecdsa.PrivateKey
	}{
		{path: p.CACert, typ: "CERTIFICATE", der: caDER},
		{path: p.CAKey, key: caKey},
		{path: p.ServingCert, typ: "CERTIFICATE", der: srvDER},
		{path: p.ServingKey, key: srvKey},
		{path: p.SAKey, key: saKey},
		{path: p.SAPub, typ: "PUBLIC KEY", der: saPub},
	}
	for _, f := range files {
		if f.key != nil {
			der, err := x509.MarshalECPrivateKey(f.key)
			if err != nil {
				return pki{}, fmt.Errorf("encode %s: %w", filepath.Base(f.path), err)
			}
			f.typ, f.der = "EC PRIVATE KEY", der
		}
		data := pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der})
		if err := os.WriteFile(f.path, data, 0o600); err != nil {
			return pki{}, fmt.Errorf("write %s: %w", filepath.Base(f.path), err)
		}
	}
	return p, nil
}

// serial returns a random 128-bit certificate serial number.
func serial() *big.Int {
	// crypto/rand.Reader never returns an error (Go 1.24+), so neither
	// does rand.Int with it.
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	return n
}

// user is an identity of the static token file.
type user struct {
	Name   string
	Groups []string
	Token  string
}

// newToken returns 32 random bytes, hex-encoded.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// tokenFile renders users in kube-apiserver's --token-auth-file format:
// token,user,uid,"group1,group2" per line.
func tokenFile(users []user) []byte {
	var b strings.Builder
	for _, u := range users {
		fmt.Fprintf(&b, "%s,%s,%s", u.Token, u.Name, u.Name)
		if len(u.Groups) > 0 {
			fmt.Fprintf(&b, ",%q", strings.Join(u.Groups, ","))
		}
		b.WriteByte('\n')
	}
	return []byte(b.String())
}
