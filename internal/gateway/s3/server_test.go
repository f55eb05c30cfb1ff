package s3_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	gws3 "github.com/canopyfs/canopy/internal/gateway/s3"
)

func TestSweepUploads(t *testing.T) {
	e := start(t)
	e.mkbucket(t, "bkt")
	cr, err := e.s3.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s3.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("k"), UploadId: cr.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("part")}); err != nil {
		t.Fatal(err)
	}
	be := gws3.NewBackend(e.c, "/", gws3.NewKeyring())
	if n, err := be.SweepUploads(e.ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("sweep of uploads idle for an hour: %d, %v", n, err)
	}
	if n, err := be.SweepUploads(e.ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("sweep of every upload: %d, %v", n, err)
	}
	_, err = e.s3.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("k"), UploadId: cr.UploadId,
		PartNumber: aws.Int32(2), Body: strings.NewReader("part")})
	if code(err) != "NoSuchUpload" {
		t.Fatalf("part of a swept upload: %v", err)
	}
}

// selfSigned makes a certificate for 127.0.0.1.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "canopy test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

func TestTLS(t *testing.T) {
	e := start(t)
	cert, pool := selfSigned(t)
	gw, err := gws3.Start(gws3.Config{Client: e.c, Listen: "127.0.0.1:0", TLS: &tls.Config{Certificates: []tls.Certificate{cert}},
		Keys: gws3.NewKeyring(gws3.Key{Access: access, Secret: secret})})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	sc := s3.New(s3.Options{Region: gws3.Region, BaseEndpoint: aws.String("https://" + gw.Addr().String()), UsePathStyle: true,
		HTTPClient: hc, Credentials: credentials.NewStaticCredentialsProvider(access, secret, "")})
	if _, err := sc.CreateBucket(e.ctx, &s3.CreateBucketInput{Bucket: aws.String("sealed")}); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("sealed"), Key: aws.String("k"), Body: strings.NewReader("over TLS")}); err != nil {
		t.Fatal(err)
	}
	if b, err := e.c.ReadFile(e.ctx, "/sealed/k"); err != nil || string(b) != "over TLS" {
		t.Fatalf("SDK read %q, %v", b, err)
	}
	// Plain HTTP to the TLS port gets no S3 answer.
	if resp, err := http.Get("http://" + gw.Addr().String() + "/sealed/k"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP read an object from the TLS port")
		}
	}
}
