// Package sigstoretest is an in-process Fulcio, Rekor and timestamp authority for tests, because
// the real services cannot run here (no network). It is faithful where
// verification looks: Fulcio checks the proof of possession and issues a
// short-lived leaf under a root → intermediate chain with a URI SAN and the
// GitHub OID extensions Fulcio derives from an Actions token; Rekor
// canonicalizes the proposed dsse entry with Rekor's own types, signs a SET
// over it and returns a signed checkpoint with an inclusion proof. What it
// does not do: verify the OIDC token's signature (only GitHub could sign
// one) and embed SCTs (the trusted root it writes has no CT log, so
// verifiers do not require them).
package sigstoretest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"time"

	jsoncanonicalizer "github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	"github.com/digitorus/timestamp"
	"github.com/go-openapi/runtime"
	"github.com/go-openapi/swag/conv"
	"github.com/sigstore/rekor/pkg/generated/models"
	"github.com/sigstore/rekor/pkg/types"
	_ "github.com/sigstore/rekor/pkg/types/dsse/v0.0.1" // register the dsse entry type
	rekorutil "github.com/sigstore/rekor/pkg/util"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// GitHubIssuer is the OIDC issuer of GitHub Actions tokens.
const GitHubIssuer = "https://token.actions.githubusercontent.com"

// rekorHost is the checkpoint origin, as sigstore-go derives it from the
// log's base URL.
const rekorHost = "rekor.localhost"

// Claims are the GitHub Actions token claims Fulcio turns into a certificate.
type Claims struct {
	Issuer         string `json:"iss"`
	Subject        string `json:"sub"`
	Repository     string `json:"repository,omitempty"`
	Ref            string `json:"ref,omitempty"`
	SHA            string `json:"sha,omitempty"`
	Workflow       string `json:"workflow,omitempty"`
	EventName      string `json:"event_name,omitempty"`
	JobWorkflowRef string `json:"job_workflow_ref,omitempty"`
	Email          string `json:"email,omitempty"`
	EmailVerified  bool   `json:"email_verified,omitempty"`
}

// GitHubSHA is the commit GitHub's claims name.
const GitHubSHA = "4f2c9a1e0b7d3c5a8e6f1b2d4c6a8e0f1a3b5c7d"

// GitHub returns the claims of a token for workflow file wf (e.g.
// ".github/workflows/sign.yml") of repo running on ref.
func GitHub(repo, wf, ref string) Claims {
	return Claims{
		Issuer:         GitHubIssuer,
		Subject:        "repo:" + repo + ":ref:" + ref,
		Repository:     repo,
		Ref:            ref,
		SHA:            GitHubSHA,
		Workflow:       "sign",
		EventName:      "push",
		JobWorkflowRef: repo + "/" + wf + "@" + ref,
	}
}

// Identity is the certificate SAN Fulcio issues for c.
func (c Claims) Identity() string {
	if c.JobWorkflowRef != "" {
		return "https://github.com/" + c.JobWorkflowRef
	}
	return c.Email
}

// Token encodes c as an unsigned JWT (header.payload.signature).
func (c Claims) Token() string {
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`))
	body, _ := json.Marshal(c)
	return head + "." + enc.EncodeToString(body) + "." + enc.EncodeToString([]byte("unsigned"))
}

// Sigstore is a running fake Fulcio, Rekor and RFC 3161 timestamp authority.
type Sigstore struct {
	Fulcio *httptest.Server
	Rekor  *httptest.Server
	// TSA answers RFC 3161 timestamp requests at its root URL.
	TSA *httptest.Server

	rootCert  *x509.Certificate
	interCert *x509.Certificate
	interKey  *ecdsa.PrivateKey
	rekorKey  *ecdsa.PrivateKey
	tsaInter  *x509.Certificate
	tsaLeaf   *x509.Certificate
	tsaKey    *ecdsa.PrivateKey
	created   time.Time

	mu        sync.Mutex
	logIndex  int64
	logOffset time.Duration
}

// New starts the fake services; Close stops them.
func New() (*Sigstore, error) {
	rootCert, rootKey, err := ca.GenerateRootCa()
	if err != nil {
		return nil, fmt.Errorf("root CA: %w", err)
	}
	interCert, interKey, err := ca.GenerateFulcioIntermediate(rootCert, rootKey)
	if err != nil {
		return nil, fmt.Errorf("intermediate CA: %w", err)
	}
	rekorKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("rekor key: %w", err)
	}
	tsaInter, tsaInterKey, err := ca.GenerateTSAIntermediate(rootCert, rootKey)
	if err != nil {
		return nil, fmt.Errorf("TSA intermediate: %w", err)
	}
	tsaKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("TSA key: %w", err)
	}
	tsaLeaf, err := tsaLeafCert(tsaKey, tsaInter, tsaInterKey)
	if err != nil {
		return nil, fmt.Errorf("TSA certificate: %w", err)
	}
	s := &Sigstore{rootCert: rootCert, interCert: interCert, interKey: interKey, rekorKey: rekorKey,
		tsaInter: tsaInter, tsaLeaf: tsaLeaf, tsaKey: tsaKey, created: time.Now()}
	s.Fulcio = httptest.NewServer(http.HandlerFunc(s.serveFulcio))
	s.Rekor = httptest.NewServer(http.HandlerFunc(s.serveRekor))
	s.TSA = httptest.NewServer(http.HandlerFunc(s.serveTSA))
	return s, nil
}

// tsaLeafCert is a timestamping leaf valid as long as its intermediate,
// with the critical timestamping EKU RFC 3161 requires.
func tsaLeafCert(key *ecdsa.PrivateKey, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, error) {
	eku, err := asn1.Marshal([]asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 8}})
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:    big.NewInt(2),
		Subject:         pkix.Name{CommonName: "fake-tsa"},
		NotBefore:       parent.NotBefore,
		NotAfter:        parent.NotAfter,
		KeyUsage:        x509.KeyUsageDigitalSignature,
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 37}, Critical: true, Value: eku}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// Close stops the servers.
func (s *Sigstore) Close() {
	s.Fulcio.Close()
	s.Rekor.Close()
	s.TSA.Close()
}

// serveTSA answers an RFC 3161 timestamp query.
func (s *Sigstore) serveTSA(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/timestamp-query" {
		http.Error(w, "want a POST of application/timestamp-query", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, err := timestamp.ParseRequest(body)
	if err != nil {
		http.Error(w, "bad timestamp request: "+err.Error(), http.StatusBadRequest)
		return
	}
	ts := timestamp.Timestamp{
		HashAlgorithm:   req.HashAlgorithm,
		HashedMessage:   req.HashedMessage,
		Time:            time.Now(),
		Nonce:           req.Nonce,
		Policy:          asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 2},
		ExtraExtensions: req.Extensions,
	}
	resp, err := ts.CreateResponseWithOpts(s.tsaLeaf, s.tsaKey, crypto.SHA256)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/timestamp-reply")
	_, _ = w.Write(resp)
}

// SetLogTimeOffset makes Rekor record entries offset from now, e.g. after
// the certificate expired.
func (s *Sigstore) SetLogTimeOffset(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logOffset = d
}

// TrustedRoot returns the trusted material: the Fulcio chain and the Rekor key.
func (s *Sigstore) TrustedRoot() (*root.TrustedRoot, error) {
	logID := s.logID()
	rawID, _ := hex.DecodeString(logID)
	start := s.created.Add(-time.Hour)
	fca := &root.FulcioCertificateAuthority{
		Root:                s.rootCert,
		Intermediates:       []*x509.Certificate{s.interCert},
		ValidityPeriodStart: start,
		URI:                 s.Fulcio.URL,
	}
	tlogs := map[string]*root.TransparencyLog{logID: {
		// The fake's own URL, so a signer that takes its log from the
		// trusted root (planlock sign --key --trusted-root) reaches it.
		BaseURL:             s.Rekor.URL,
		ID:                  rawID,
		ValidityPeriodStart: start,
		HashFunc:            crypto.SHA256,
		PublicKey:           s.rekorKey.Public(),
		SignatureHashFunc:   crypto.SHA256,
	}}
	tsa := &root.SigstoreTimestampingAuthority{
		Root:                s.rootCert,
		Intermediates:       []*x509.Certificate{s.tsaInter},
		Leaf:                s.tsaLeaf,
		ValidityPeriodStart: start,
		URI:                 s.TSA.URL,
	}
	return root.NewTrustedRoot(root.TrustedRootMediaType01, []root.CertificateAuthority{fca}, nil, []root.TimestampingAuthority{tsa}, tlogs)
}

// TrustedRootJSON is TrustedRoot as trusted_root.json.
func (s *Sigstore) TrustedRootJSON() ([]byte, error) {
	tr, err := s.TrustedRoot()
	if err != nil {
		return nil, err
	}
	return tr.MarshalJSON()
}

func (s *Sigstore) logID() string {
	der, _ := x509.MarshalPKIXPublicKey(s.rekorKey.Public())
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

func httpError(w http.ResponseWriter, code int, format string, a ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": code, "message": fmt.Sprintf(format, a...)})
}

// serveFulcio implements POST /api/v2/signingCert.
func (s *Sigstore) serveFulcio(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/v2/signingCert" {
		httpError(w, http.StatusNotFound, "not found")
		return
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		httpError(w, http.StatusUnauthorized, "missing bearer token")
		return
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		httpError(w, http.StatusUnauthorized, "malformed token")
		return
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	var c Claims
	if err == nil {
		err = json.Unmarshal(payload, &c)
	}
	if err != nil || c.Issuer == "" || c.Identity() == "" {
		httpError(w, http.StatusUnauthorized, "token has no usable claims")
		return
	}
	var req struct {
		PublicKeyRequest struct {
			PublicKey struct {
				Content string `json:"content"`
			} `json:"publicKey"`
			ProofOfPossession string `json:"proofOfPossession"`
		} `json:"publicKeyRequest"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, "bad request: %v", err)
		return
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(req.PublicKeyRequest.PublicKey.Content))
	if err != nil {
		httpError(w, http.StatusBadRequest, "bad public key: %v", err)
		return
	}
	// Proof of possession: the token's subject signed with the key.
	pop, err := base64.StdEncoding.DecodeString(req.PublicKeyRequest.ProofOfPossession)
	if err != nil {
		httpError(w, http.StatusBadRequest, "bad proof of possession")
		return
	}
	v, err := signature.LoadDefaultVerifier(pub)
	if err == nil {
		subject := c.Subject
		if c.Email != "" {
			subject = c.Email
		}
		err = v.VerifySignature(bytes.NewReader(pop), strings.NewReader(subject))
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, "proof of possession does not verify")
		return
	}
	leaf, err := s.issue(c, pub)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "issue: %v", err)
		return
	}
	chain := []string{pemCert(leaf), pemCert(s.interCert.Raw), pemCert(s.rootCert.Raw)}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK) // Fulcio's gRPC gateway answers 200, not 201
	_ = json.NewEncoder(w).Encode(map[string]any{
		"signedCertificateEmbeddedSct": map[string]any{"chain": map[string]any{"certificates": chain}},
	})
}

func pemCert(der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func derString(s string) []byte {
	b, _ := asn1.MarshalWithParams(s, "utf8")
	return b
}

// issue makes a 10-minute leaf certificate as Fulcio does for GitHub tokens.
func (s *Sigstore) issue(c Claims, pub crypto.PublicKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		NotBefore:    now.Add(-time.Second),
		NotAfter:     now.Add(10 * time.Minute),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
	}
	if c.JobWorkflowRef != "" {
		u, err := url.Parse(c.Identity())
		if err != nil {
			return nil, err
		}
		tmpl.URIs = []*url.URL{u}
	} else {
		tmpl.EmailAddresses = []string{c.Email}
	}
	ext := func(oid asn1.ObjectIdentifier, v []byte) {
		tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, pkix.Extension{Id: oid, Value: v})
	}
	//lint:ignore SA1019 Fulcio still issues the legacy issuer extension beside OIDIssuerV2; the fake does too
	ext(certificate.OIDIssuer, []byte(c.Issuer))
	ext(certificate.OIDIssuerV2, derString(c.Issuer))
	if c.Repository != "" {
		//lint:ignore SA1019 Fulcio still issues the legacy GitHub extensions beside the new ones; the fake does too
		ext(certificate.OIDGitHubWorkflowTrigger, []byte(c.EventName))
		//lint:ignore SA1019 Fulcio still issues the legacy GitHub extensions beside the new ones; the fake does too
		ext(certificate.OIDGitHubWorkflowSHA, []byte(c.SHA))
		//lint:ignore SA1019 Fulcio still issues the legacy GitHub extensions beside the new ones; the fake does too
		ext(certificate.OIDGitHubWorkflowName, []byte(c.Workflow))
		//lint:ignore SA1019 Fulcio still issues the legacy GitHub extensions beside the new ones; the fake does too
		ext(certificate.OIDGitHubWorkflowRepository, []byte(c.Repository))
		//lint:ignore SA1019 Fulcio still issues the legacy GitHub extensions beside the new ones; the fake does too
		ext(certificate.OIDGitHubWorkflowRef, []byte(c.Ref))
		ext(certificate.OIDBuildSignerURI, derString(c.Identity()))
		ext(certificate.OIDSourceRepositoryURI, derString("https://github.com/"+c.Repository))
		ext(certificate.OIDSourceRepositoryDigest, derString(c.SHA))
		ext(certificate.OIDSourceRepositoryRef, derString(c.Ref))
		ext(certificate.OIDBuildTrigger, derString(c.EventName))
	}
	return x509.CreateCertificate(rand.Reader, tmpl, s.interCert, pub, s.interKey)
}

// serveRekor implements POST /api/v1/log/entries for dsse entries.
func (s *Sigstore) serveRekor(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/v1/log/entries" {
		httpError(w, http.StatusNotFound, "not found")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<22))
	if err != nil {
		httpError(w, http.StatusBadRequest, "read: %v", err)
		return
	}
	pe, err := models.UnmarshalProposedEntry(bytes.NewReader(body), runtime.JSONConsumer())
	if err != nil {
		httpError(w, http.StatusBadRequest, "proposed entry: %v", err)
		return
	}
	ctx := r.Context()
	entry, err := types.CreateVersionedEntry(pe)
	if err != nil {
		httpError(w, http.StatusBadRequest, "entry: %v", err)
		return
	}
	canonical, err := types.CanonicalizeEntry(ctx, entry)
	if err != nil {
		httpError(w, http.StatusBadRequest, "canonicalize: %v", err)
		return
	}
	anon, uuid, err := s.logEntry(ctx, canonical)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "log: %v", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("ETag", uuid)
	w.Header().Set("Location", "/api/v1/log/entries/"+uuid)
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]models.LogEntryAnon{uuid: anon})
}

// logEntry appends canonical as the only leaf of a fresh tree and signs the
// SET and checkpoint, as Rekor v1 does.
func (s *Sigstore) logEntry(ctx context.Context, canonical []byte) (models.LogEntryAnon, string, error) {
	s.mu.Lock()
	idx := s.logIndex
	s.logIndex++
	itime := time.Now().Add(s.logOffset).Unix()
	s.mu.Unlock()

	logID := s.logID()
	b64 := base64.StdEncoding.EncodeToString(canonical)
	set, err := s.signSET(tlog.RekorPayload{Body: b64, IntegratedTime: itime, LogIndex: idx, LogID: logID})
	if err != nil {
		return models.LogEntryAnon{}, "", err
	}
	leaf := sha256.Sum256(append([]byte{0}, canonical...))
	signer, err := signature.LoadECDSASignerVerifier(s.rekorKey, crypto.SHA256)
	if err != nil {
		return models.LogEntryAnon{}, "", err
	}
	cp, err := rekorutil.CreateAndSignCheckpoint(ctx, rekorHost, 1, 1, leaf[:], signer)
	if err != nil {
		return models.LogEntryAnon{}, "", err
	}
	rootHash := hex.EncodeToString(leaf[:])
	anon := models.LogEntryAnon{
		Body:           b64,
		IntegratedTime: conv.Pointer(itime),
		LogID:          conv.Pointer(logID),
		LogIndex:       conv.Pointer(idx),
		Verification: &models.LogEntryAnonVerification{
			SignedEntryTimestamp: set,
			InclusionProof: &models.InclusionProof{
				TreeSize:   conv.Pointer(int64(1)),
				RootHash:   &rootHash,
				LogIndex:   conv.Pointer(int64(0)),
				Hashes:     []string{},
				Checkpoint: conv.Pointer(string(cp)),
			},
		},
	}
	return anon, hex.EncodeToString(leaf[:]), nil
}

func (s *Sigstore) signSET(p tlog.RekorPayload) ([]byte, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	canon, err := jsoncanonicalizer.Transform(raw)
	if err != nil {
		return nil, err
	}
	signer, err := signature.LoadECDSASignerVerifier(s.rekorKey, crypto.SHA256)
	if err != nil {
		return nil, err
	}
	return signer.SignMessage(bytes.NewReader(canon))
}
