package sign

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	vault "github.com/hashicorp/vault/api"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	sgsign "github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/kms"
	// The one KMS provider compiled in: HashiCorp Vault transit
	// (hashivault://KEY; its OpenBao alias openbao://KEY). loadKMS accepts
	// only the providers registered this way.
	_ "github.com/sigstore/sigstore/pkg/signature/kms/hashivault"
	"github.com/sigstore/sigstore/pkg/signature/options"
)

// minRSABits is the smallest RSA key planlock accepts.
const minRSABits = 2048

// KeyTypes lists the key types GenerateKeyPair makes, default first.
var KeyTypes = []string{"ecdsa-p256", "ecdsa-p384", "ed25519", "rsa-2048", "rsa-3072", "rsa-4096"}

// GenerateKeyPair makes a key pair of the given type (see KeyTypes) and
// returns the unencrypted PKCS#8 private key and the PKIX public key as PEM.
func GenerateKeyPair(keyType string) (privPEM, pubPEM []byte, err error) {
	var priv crypto.Signer
	switch keyType {
	case "", "ecdsa-p256":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ecdsa-p384":
		priv, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ed25519":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	case "rsa-2048":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case "rsa-3072":
		priv, err = rsa.GenerateKey(rand.Reader, 3072)
	case "rsa-4096":
		priv, err = rsa.GenerateKey(rand.Reader, 4096)
	default:
		return nil, nil, fmt.Errorf("unknown key type %q (want one of %s)", keyType, strings.Join(KeyTypes, ", "))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("generate %s key: %w", keyType, err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("encode private key: %w", err)
	}
	pubPEM, err = cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("encode public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), pubPEM, nil
}

// ParsePrivateKey reads an unencrypted PEM private key: PKCS#8 ("PRIVATE
// KEY"), SEC1 ("EC PRIVATE KEY", possibly after an "EC PARAMETERS" block as
// `openssl ecparam -genkey` writes) or PKCS#1 ("RSA PRIVATE KEY").
func ParsePrivateKey(data []byte) (crypto.Signer, error) {
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM private key found")
		}
		var key any
		var err error
		switch block.Type {
		case "EC PARAMETERS":
			continue
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			return nil, errors.New("encrypted private keys are not supported; decrypt it first (openssl pkey -in KEY -out PLAIN)")
		default:
			return nil, fmt.Errorf("PEM block %q is not a private key", block.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", block.Type, err)
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("unsupported private key type %T", key)
		}
		if err := checkKey(signer.Public()); err != nil {
			return nil, err
		}
		return signer, nil
	}
}

// ParsePublicKey reads a PEM public key (PKIX "PUBLIC KEY", or PKCS#1 "RSA
// PUBLIC KEY").
func ParsePublicKey(data []byte) (crypto.PublicKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM public key found")
	}
	var pub crypto.PublicKey
	var err error
	switch block.Type {
	case "PUBLIC KEY":
		pub, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
	default:
		if strings.Contains(block.Type, "PRIVATE") {
			return nil, errors.New("this is a private key; verification takes the public key (.pub)")
		}
		return nil, fmt.Errorf("PEM block %q is not a public key", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", block.Type, err)
	}
	if err := checkKey(pub); err != nil {
		return nil, err
	}
	return pub, nil
}

// checkKey refuses keys too weak or of a kind sigstore cannot verify.
func checkKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
			return nil
		}
		return fmt.Errorf("ECDSA curve %s is not supported (want P-256, P-384 or P-521)", k.Curve.Params().Name)
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return fmt.Errorf("RSA key of %d bits is too small (want at least %d)", k.N.BitLen(), minRSABits)
		}
		return nil
	case ed25519.PublicKey:
		return nil
	}
	return fmt.Errorf("unsupported public key type %T", pub)
}

// KeyID is a stable name of a public key: "sha256:" and the hex sha256 of its
// PKIX encoding.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encode public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return sha256DigestPrefix + hex.EncodeToString(sum[:]), nil
}

// keyHint is the bundle's public key hint, computed as sigstore-go does.
func keyHint(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encode public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}

// IsKMSRef reports whether ref looks like a KMS URI ("scheme://...") rather
// than a file path.
func IsKMSRef(ref string) bool {
	i := strings.Index(ref, "://")
	return i > 0 && !strings.ContainsAny(ref[:i], "/\\.")
}

// loadKMS returns the signer for a KMS URI, only for providers compiled into
// this binary. kms.Get would otherwise run a "sigstore-kms-<scheme>" program
// found on $PATH, which an attacker controlling PATH could supply.
func loadKMS(ctx context.Context, ref string) (signature.SignerVerifier, error) {
	providers := kms.SupportedProviders()
	sort.Strings(providers)
	for _, p := range providers {
		if strings.HasPrefix(ref, p) {
			sv, err := kms.Get(ctx, ref, crypto.SHA256)
			if err != nil {
				return nil, fmt.Errorf("load KMS key %s: %w", ref, flattenVault(err))
			}
			return kmsSigner{sv}, nil
		}
	}
	scheme := ref[:strings.Index(ref, "://")+3]
	if len(providers) == 0 {
		return nil, fmt.Errorf("KMS scheme %s is not supported: this build has no KMS provider; use a PEM key file", scheme)
	}
	return nil, fmt.Errorf("KMS scheme %s is not supported (this build supports %s)", scheme, strings.Join(providers, ", "))
}

// kmsSigner makes a KMS provider's errors one line (see flattenVault).
type kmsSigner struct{ signature.SignerVerifier }

func (k kmsSigner) PublicKey(opts ...signature.PublicKeyOption) (crypto.PublicKey, error) {
	pub, err := k.SignerVerifier.PublicKey(opts...)
	return pub, flattenVault(err)
}

func (k kmsSigner) SignMessage(message io.Reader, opts ...signature.SignOption) ([]byte, error) {
	sig, err := k.SignerVerifier.SignMessage(message, opts...)
	return sig, flattenVault(err)
}

// flattenVault rewrites a Vault API error, which spans several lines, into
// one line naming the request, status and Vault's messages. The rest of the
// chain (the provider's context) is kept, and errors.As still finds the
// *vault.ResponseError. The token is never part of it: Vault's error carries
// no request headers.
func flattenVault(err error) error {
	var re *vault.ResponseError
	if err == nil || !errors.As(err, &re) {
		return err
	}
	summary := fmt.Sprintf("Vault refused %s %s: %d", re.HTTPMethod, re.URL, re.StatusCode)
	if len(re.Errors) > 0 {
		summary += " " + strings.Join(strings.Fields(strings.Join(re.Errors, "; ")), " ")
	}
	if re.StatusCode == 403 {
		summary += " (check VAULT_TOKEN and its policy on the transit key)"
	}
	return &flatError{msg: strings.Replace(err.Error(), re.Error(), summary, 1), err: err}
}

type flatError struct {
	msg string
	err error
}

func (e *flatError) Error() string { return e.msg }
func (e *flatError) Unwrap() error { return e.err }

// LoadSigningKey returns a sigstore-go Keypair for --key: a PEM private key
// file's content or a KMS URI (see IsKMSRef).
func LoadSigningKey(ctx context.Context, ref string, readFile func(string) ([]byte, error)) (sgsign.Keypair, error) {
	if IsKMSRef(ref) {
		sv, err := loadKMS(ctx, ref)
		if err != nil {
			return nil, err
		}
		kp, err := NewKeypair(sv)
		if err != nil {
			return nil, fmt.Errorf("KMS key %s: %w", ref, err)
		}
		return kp, nil
	}
	data, err := readFile(ref)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	priv, err := ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", ref, err)
	}
	sv, err := signature.LoadDefaultSignerVerifier(priv)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", ref, err)
	}
	return NewKeypair(sv)
}

// Keypair adapts a long-lived signature.SignerVerifier (PEM key or KMS) to
// sigstore-go's sign.Keypair, which in sigstore-go v1.3.0 is implemented only
// by ephemeral keys.
type Keypair struct {
	sv      signature.SignerVerifier
	pub     crypto.PublicKey
	details signature.AlgorithmDetails
	hint    []byte
}

var _ sgsign.Keypair = (*Keypair)(nil)

// NewKeypair wraps sv. The algorithm is sigstore's default for the key
// (ECDSA P-256/SHA-256, P-384/SHA-384, RSA PKCS#1 v1.5/SHA-256, pure Ed25519),
// which is what a verifier loads from the public key alone.
func NewKeypair(sv signature.SignerVerifier) (*Keypair, error) {
	pub, err := sv.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("public key of signer: %w", err)
	}
	if err := checkKey(pub); err != nil {
		return nil, err
	}
	details, err := signature.GetDefaultAlgorithmDetails(pub)
	if err != nil {
		return nil, fmt.Errorf("algorithm for key: %w", err)
	}
	hint, err := keyHint(pub)
	if err != nil {
		return nil, err
	}
	return &Keypair{sv: sv, pub: pub, details: details, hint: []byte(hint)}, nil
}

// GetHashAlgorithm returns the hash the signature is made over.
func (k *Keypair) GetHashAlgorithm() protocommon.HashAlgorithm { return k.details.GetProtoHashType() }

// GetSigningAlgorithm returns the key's signature algorithm.
func (k *Keypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return k.details.GetSignatureAlgorithm()
}

// GetHint returns the public key hint written into the bundle.
func (k *Keypair) GetHint() []byte { return k.hint }

// GetKeyAlgorithm names the key family.
func (k *Keypair) GetKeyAlgorithm() string {
	switch k.details.GetKeyType() {
	case signature.ECDSA:
		return "ECDSA"
	case signature.RSA:
		return "RSA"
	case signature.ED25519:
		return "ED25519"
	}
	return ""
}

// GetPublicKey returns the public key.
func (k *Keypair) GetPublicKey() crypto.PublicKey { return k.pub }

// GetPublicKeyPem returns the public key as PEM.
func (k *Keypair) GetPublicKeyPem() (string, error) {
	b, err := cryptoutils.MarshalPublicKeyToPEM(k.pub)
	if err != nil {
		return "", fmt.Errorf("encode public key: %w", err)
	}
	return string(b), nil
}

// SignData signs data and returns the signature and what was signed (the
// digest, or the data itself for pure Ed25519), as sign.Keypair requires.
func (k *Keypair) SignData(ctx context.Context, data []byte) ([]byte, []byte, error) {
	signed := data
	if hf := k.details.GetHashType(); hf != crypto.Hash(0) {
		h := hf.New()
		h.Write(data)
		signed = h.Sum(nil)
	}
	// The hash is the key's default, which the verifier derives from the
	// public key; a KMS signer is loaded before its key type is known.
	sig, err := k.sv.SignMessage(bytes.NewReader(data), options.WithContext(ctx), options.WithCryptoSignerOpts(k.details.GetHashType()))
	if err != nil {
		return nil, nil, fmt.Errorf("sign: %w", err)
	}
	return sig, signed, nil
}
