package sign

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	sgsign "github.com/sigstore/sigstore-go/pkg/sign"
	"google.golang.org/protobuf/encoding/protojson"
)

// Public-good sigstore service URLs, the defaults for keyless signing.
const (
	DefaultFulcioURL = "https://fulcio.sigstore.dev"
	DefaultRekorURL  = "https://rekor.sigstore.dev"
)

// SignOptions say how to sign. With Keypair nil, signing is keyless: an
// ephemeral key, a Fulcio certificate for IDToken and a Rekor entry.
type SignOptions struct {
	// Keypair signs with a long-lived key (see LoadSigningKey). Its bundle
	// carries the key hint, no certificate, and a Rekor entry only when
	// RekorURL is set.
	Keypair sgsign.Keypair
	// IDToken is the OIDC token for Fulcio (keyless only); see IDToken.
	IDToken string
	// FulcioURL and RekorURL default to the public-good instance for keyless
	// signing. TSAURL, when set, adds an RFC 3161 timestamp.
	FulcioURL string
	RekorURL  string
	TSAURL    string
	// Transport is the HTTP transport for Fulcio and the TSA (nil: default).
	Transport http.RoundTripper
	// RekorClient replaces the Rekor HTTP client (used by tests).
	RekorClient sgsign.RekorClient
	// Now gives the signing time recorded in the predicate (nil: time.Now).
	Now func() time.Time
}

// Signed is the result of Sign.
type Signed struct {
	// Bundle is the sigstore bundle as JSON, to write to BundlePath(file).
	Bundle []byte
	// Predicate is what was signed (path cleaned, signing time set).
	Predicate Predicate
	// Signer is who signed: the identity and issuer of the certificate
	// Fulcio issued (keyless) or the key's ID, for display.
	Signer Signer
	// LogIndex is the Rekor log index, or -1 without a log entry.
	LogIndex int64
}

// Sign makes the approval bundle for content: an in-toto statement whose
// subject is content's sha256 named pred.Path, with pred as predicate,
// signed in a DSSE envelope.
func Sign(ctx context.Context, content []byte, pred Predicate, opts SignOptions) (*Signed, error) {
	clean, err := CleanPath(pred.Path)
	if err != nil {
		return nil, err
	}
	pred.Path = clean
	if _, err := ParseKind(string(pred.Kind)); err != nil {
		return nil, err
	}
	if pred.SignedAt.IsZero() {
		now := time.Now
		if opts.Now != nil {
			now = opts.Now
		}
		pred.SignedAt = now().UTC().Truncate(time.Second)
	}
	payload, err := newStatement(content, pred)
	if err != nil {
		return nil, err
	}

	bopts := sgsign.BundleOptions{Context: ctx}
	keypair := opts.Keypair
	rekorURL := opts.RekorURL
	if keypair == nil {
		if opts.IDToken == "" {
			return nil, errors.New("keyless signing needs an OIDC token (GitHub Actions with id-token: write, or SIGSTORE_ID_TOKEN); or sign with --key")
		}
		keypair, err = sgsign.NewEphemeralKeypair(nil)
		if err != nil {
			return nil, fmt.Errorf("ephemeral key: %w", err)
		}
		fulcioURL := opts.FulcioURL
		if fulcioURL == "" {
			fulcioURL = DefaultFulcioURL
		}
		if rekorURL == "" {
			rekorURL = DefaultRekorURL
		}
		bopts.CertificateProvider = sgsign.NewFulcio(&sgsign.FulcioOptions{BaseURL: fulcioURL, Transport: opts.Transport, Retries: 1})
		bopts.CertificateProviderOptions = &sgsign.CertificateProviderOptions{IDToken: opts.IDToken}
	}
	if rekorURL != "" || opts.RekorClient != nil {
		bopts.TransparencyLogs = append(bopts.TransparencyLogs, sgsign.NewRekor(&sgsign.RekorOptions{
			BaseURL: rekorURL, Client: opts.RekorClient, Retries: 1,
		}))
	}
	if opts.TSAURL != "" {
		tsaOpts := sgsign.TimestampAuthorityOptions{URL: opts.TSAURL, Transport: opts.Transport, Retries: 1}
		bopts.TimestampAuthorities = append(bopts.TimestampAuthorities, sgsign.NewTimestampAuthority(&tsaOpts))
	}

	pb, err := sgsign.Bundle(&sgsign.DSSEData{Data: payload, PayloadType: InTotoPayloadType}, keypair, bopts)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", pred.Path, err)
	}
	out, err := protojson.MarshalOptions{Indent: "  "}.Marshal(pb)
	if err != nil {
		return nil, fmt.Errorf("encode bundle: %w", err)
	}
	res := &Signed{Bundle: append(out, '\n'), Predicate: pred, LogIndex: -1}
	if tl := pb.GetVerificationMaterial().GetTlogEntries(); len(tl) > 0 {
		res.LogIndex = tl[0].GetLogIndex()
	}
	if raw := pb.GetVerificationMaterial().GetCertificate().GetRawBytes(); raw != nil {
		cert, err := x509.ParseCertificate(raw)
		if err != nil {
			return nil, fmt.Errorf("certificate from Fulcio: %w", err)
		}
		sum, err := certificate.SummarizeCertificate(cert)
		if err != nil {
			return nil, fmt.Errorf("certificate from Fulcio: %w", err)
		}
		res.Signer = signerOf(sum)
	} else {
		id, err := KeyID(keypair.GetPublicKey())
		if err != nil {
			return nil, err
		}
		res.Signer = Signer{Identity: "key " + id, KeyID: id}
	}
	return res, nil
}
