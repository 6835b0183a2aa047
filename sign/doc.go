// Package sign makes and checks planlock approvals: sigstore signatures over
// the exact bytes of a plan or hold file.
//
// # What is signed
//
// An approval is an in-toto Statement v1 in a DSSE envelope, in a sigstore
// bundle (written next to the file as BundlePath(file), i.e.
// "<file>.sigstore.json"). The statement has one subject, named by the
// file's repository-relative path, with the sha256 of the file's bytes; its
// predicate type is PredicateType ("https://planlock.dev/approval/v1") and
// its predicate (Predicate) records the kind (plan or hold), path,
// repository, ref, merge commit, pull request number, approvers and the
// signing time.
//
// # Signing
//
// Sign makes a bundle. Keyless (SignOptions.Keypair nil): an ephemeral key,
// a Fulcio certificate for an OIDC token (IDToken finds one in GitHub
// Actions or $SIGSTORE_ID_TOKEN) and a Rekor entry. With a key:
// LoadSigningKey reads a PEM private key (PKCS#8, SEC1 or PKCS#1; ECDSA
// P-256/P-384/P-521, Ed25519, RSA >= 2048) or a KMS URI for a provider
// compiled into the binary: only HashiCorp Vault transit, hashivault://KEY
// (and its OpenBao alias openbao://KEY), configured by VAULT_ADDR and
// VAULT_TOKEN; any other scheme is refused and a sigstore-kms-* plugin on
// $PATH is never run. Keypair adapts the signer to sigstore-go. PredicateFromGitHub fills the
// predicate from the Actions environment.
//
// # Verifying
//
// The trust policy comes from the operator, never from the file:
//
//	tm, err := sign.LoadTrustedRoot(ctx, trustedRootFile, "") // "" file: public-good via TUF, cached
//	policy, err := sign.NewPolicy(sign.PolicyOptions{
//		CertificateIdentityRegexp: `https://github\.com/acme/plans/\.github/workflows/sign\.yml@refs/heads/main`,
//		CertificateOIDCIssuer:     "https://token.actions.githubusercontent.com",
//		TrustedMaterial:           tm,
//	})
//	content, _ := os.ReadFile(path)            // read once ...
//	bundle, _ := os.ReadFile(sign.BundlePath(path))
//	a, err := policy.Verify(ctx, sign.VerifyInput{Path: "plans/refund.hcl", Content: content, Bundle: bundle, Kind: sign.KindPlan})
//	// ... and parse these same content bytes when err == nil.
//
// Verify accepts only when sigstore-go verifies the bundle (certificate
// chain, transparency log entry and, when the trusted root lists CT logs,
// SCT; or the signature under PublicKey) for the content's sha256, the
// signer matches the policy (identity regexps are anchored: the whole SAN
// must match; the GitHub workflow fields must equal the certificate's
// extensions), a keyless predicate's repository, ref and commit are the
// certificate's, and the statement's subject name, predicate type,
// predicate path and kind are the ones expected. A key-signed bundle's log
// entries and timestamps are all verified against the trusted root
// (PolicyOptions.TrustedMaterial or LoadTrustedMaterial); one that does not
// verify refuses the bundle. The Approval it returns carries the predicate,
// the signer (Signer) and SignedAt: Rekor's integrated time when present,
// else a verified RFC 3161 timestamp, else the signed predicate's signedAt,
// which only the signer vouches for (SignedAtSource "tlog", "tsa",
// "predicate"). A proxy enforcing "no downgrade" compares SignedAt.
//
// Every refusal is one line naming the file and the reason, and wraps one
// sentinel for errors.Is: ErrBundleMissing, ErrBundleNotJSON,
// ErrBundleInvalid, ErrNotApproval, ErrDigestMismatch, ErrPathMismatch,
// ErrKindMismatch, ErrIdentityNotAllowed, ErrIssuerMismatch, ErrClaimMismatch,
// ErrCertificateExpired, ErrNoTlogEntry, ErrKeyMismatch, ErrSignatureInvalid.
//
// # Holds
//
// A hold request file is signed like a plan with Kind KindHold. Verify with
// VerifyInput.Kind = KindHold proves the file was approved; which call it
// approves (plan digest, tool, arguments) is in the file itself, so the
// caller parses the verified bytes and checks that binding.
//
// # Public API
//
// sign is one of planlock's four public packages (with hclplan, gitapprove
// and proxy): cmd/planlock and a program embedding the gate sign and verify
// plan and hold files with it (Sign, Policy.Verify). In-process stand-ins of
// Fulcio, Rekor, a timestamp authority and Vault for tests are in
// internal/testkit/sigstoretest and internal/testkit/vaulttest.
package sign
