package sign

import "errors"

// Errors returned by Verify, one per reason a file is refused. Every error
// Verify returns wraps exactly one of them (test with errors.Is) and reads as
// one line of plain words.
var (
	// ErrBundleMissing: there is no bundle for the file.
	ErrBundleMissing = errors.New("bundle missing")
	// ErrBundleNotJSON: the bundle is truncated or not JSON at all.
	ErrBundleNotJSON = errors.New("bundle is not valid JSON")
	// ErrBundleInvalid: the bundle is JSON but not a valid sigstore bundle.
	ErrBundleInvalid = errors.New("bundle is not a valid sigstore bundle")
	// ErrNotApproval: the bundle signs something that is not a planlock approval.
	ErrNotApproval = errors.New("bundle is not a planlock approval")
	// ErrDigestMismatch: the file's bytes are not the bytes that were signed.
	ErrDigestMismatch = errors.New("digest mismatch")
	// ErrPathMismatch: the approval names another file.
	ErrPathMismatch = errors.New("approval names another file")
	// ErrKindMismatch: a hold approval used as a plan approval or the reverse.
	ErrKindMismatch = errors.New("wrong approval kind")
	// ErrIdentityNotAllowed: the signer's identity (certificate SAN, workflow
	// repository or ref) is not allowed by the policy.
	ErrIdentityNotAllowed = errors.New("identity not allowed by policy")
	// ErrClaimMismatch: a keyless approval's predicate names another
	// repository, ref or commit than the signing certificate.
	ErrClaimMismatch = errors.New("approval contradicts its certificate")
	// ErrIssuerMismatch: the certificate's OIDC issuer is not allowed by the policy.
	ErrIssuerMismatch = errors.New("OIDC issuer not allowed by policy")
	// ErrCertificateExpired: the signing certificate was not valid when the
	// signature was logged.
	ErrCertificateExpired = errors.New("certificate expired at signing time")
	// ErrNoTlogEntry: a keyless bundle without a transparency log entry.
	ErrNoTlogEntry = errors.New("no transparency log entry")
	// ErrKeyMismatch: the bundle was not signed by the trusted key (or was
	// signed with a key where the policy wants a certificate, or the reverse).
	ErrKeyMismatch = errors.New("key mismatch")
	// ErrSignatureInvalid: any other cryptographic failure (bad signature,
	// untrusted certificate chain, bad log entry, untrusted timestamp).
	ErrSignatureInvalid = errors.New("signature does not verify")
	// ErrTrustedRootUnavailable: the trusted root to verify against could
	// not be loaded (the public-good root through TUF, offline).
	ErrTrustedRootUnavailable = errors.New("trusted root unavailable")
)
