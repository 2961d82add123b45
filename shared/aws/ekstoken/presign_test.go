package ekstoken_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/aws/ekstoken"
)

// emptySHA256 is the hex SHA-256 of an empty payload, which a presigned GET
// signs.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// decodeToken returns the presigned URL inside an EKS token.
func decodeToken(t *testing.T, tok string) *url.URL {
	t.Helper()
	body, ok := strings.CutPrefix(tok, ekstoken.Prefix)
	if !ok {
		t.Fatalf("token %q lacks prefix %q", tok, ekstoken.Prefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		t.Fatalf("token body: %v", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatalf("presigned URL: %v", err)
	}
	return u
}

// TestTokenWithTheSTSPresignClient signs with the real aws-sdk-go-v2 STS
// presign client and static credentials, and checks the URL the EKS
// authenticator will replay: a regional STS GetCallerIdentity GET whose
// SigV4 query parameters sign the x-k8s-aws-id header, and whose signature
// is the one SigV4 gives for that request.
func TestTokenWithTheSTSPresignClient(t *testing.T) {
	creds := credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token")
	client := sts.New(sts.Options{Region: "eu-west-1", Credentials: creds})
	src := ekstoken.New(sts.NewPresignClient(client), "prod-cluster")

	before := time.Now()
	tok, expiry, err := src.Token(t.Context())
	if err != nil {
		t.Fatalf("Token() error = %v", err)
	}
	if lo, hi := before.Add(ekstoken.Lifetime), time.Now().Add(ekstoken.Lifetime); expiry.Before(lo) || expiry.After(hi) {
		t.Errorf("Token() expiry = %v, want 14 minutes from now (%v..%v)", expiry, lo, hi)
	}
	u := decodeToken(t, tok)
	q := u.Query()

	t.Run("URL is a regional STS GetCallerIdentity", func(t *testing.T) {
		if u.Scheme != "https" || u.Host != "sts.eu-west-1.amazonaws.com" || (u.Path != "/" && u.Path != "") {
			t.Errorf("presigned URL = %s, want https://sts.eu-west-1.amazonaws.com/", u)
		}
		if q.Get("Action") != "GetCallerIdentity" || q.Get("Version") != "2011-06-15" {
			t.Errorf("Action/Version = %q/%q, want GetCallerIdentity/2011-06-15", q.Get("Action"), q.Get("Version"))
		}
	})

	t.Run("SigV4 query parameters sign x-k8s-aws-id", func(t *testing.T) {
		got := map[string]string{
			"X-Amz-Algorithm":      q.Get("X-Amz-Algorithm"),
			"X-Amz-Expires":        q.Get("X-Amz-Expires"),
			"X-Amz-SignedHeaders":  q.Get("X-Amz-SignedHeaders"),
			"X-Amz-Security-Token": q.Get("X-Amz-Security-Token"),
		}
		want := map[string]string{
			"X-Amz-Algorithm":      "AWS4-HMAC-SHA256",
			"X-Amz-Expires":        "60",
			"X-Amz-SignedHeaders":  "host;x-k8s-aws-id",
			"X-Amz-Security-Token": "session-token",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("query parameters mismatch (-want +got):\n%s", diff)
		}
		if !regexp.MustCompile(`^AKIDEXAMPLE/\d{8}/eu-west-1/sts/aws4_request$`).MatchString(q.Get("X-Amz-Credential")) {
			t.Errorf("X-Amz-Credential = %q, want AKIDEXAMPLE/<date>/eu-west-1/sts/aws4_request", q.Get("X-Amz-Credential"))
		}
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(q.Get("X-Amz-Signature")) {
			t.Errorf("X-Amz-Signature = %q, want 64 hex digits", q.Get("X-Amz-Signature"))
		}
		if q.Get("x-k8s-aws-id") != "" {
			t.Errorf("cluster name leaked into the query; it must travel as a signed header")
		}
	})

	t.Run("signature is SigV4 of the request with the cluster header", func(t *testing.T) {
		signedAt, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
		if err != nil {
			t.Fatalf("X-Amz-Date %q: %v", q.Get("X-Amz-Date"), err)
		}
		// Rebuild the unsigned request and presign it with the same time.
		unsigned := url.Values{}
		for k, v := range q {
			if !strings.HasPrefix(k, "X-Amz-") || k == "X-Amz-Expires" {
				unsigned[k] = v
			}
		}
		req, err := http.NewRequest(http.MethodGet, "https://sts.eu-west-1.amazonaws.com/?"+unsigned.Encode(), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("x-k8s-aws-id", "prod-cluster")
		c, err := creds.Retrieve(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := v4.NewSigner().PresignHTTP(t.Context(), c, req, emptySHA256, "sts", "eu-west-1", signedAt)
		if err != nil {
			t.Fatal(err)
		}
		wantURL, err := url.Parse(want)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := q.Get("X-Amz-Signature"), wantURL.Query().Get("X-Amz-Signature"); got != want {
			t.Errorf("X-Amz-Signature = %s, want %s", got, want)
		}
		req.Header.Set("x-k8s-aws-id", "another-cluster")
		other, _, err := v4.NewSigner().PresignHTTP(t.Context(), c, req, emptySHA256, "sts", "eu-west-1", signedAt)
		if err != nil {
			t.Fatal(err)
		}
		otherURL, _ := url.Parse(other)
		if otherURL.Query().Get("X-Amz-Signature") == q.Get("X-Amz-Signature") {
			t.Error("signature does not depend on the cluster header")
		}
	})
}
