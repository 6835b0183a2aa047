// Package vaulttest is an in-process stand-in for HashiCorp Vault's transit
// secrets engine, for tests only: Vault cannot run in planlock's test
// environment.
//
// It is faithful to what sigstore's hashivault KMS provider (v1.10.11,
// client.go) sends and reads, with Vault's paths, payloads and response
// shapes:
//
//   - GET /v1/transit/keys/NAME: the key's versions, each with its type name
//     ("P-256", "P-384", "ed25519") and public_key (PEM for ECDSA, base64 of
//     the raw key for Ed25519), and latest_version.
//   - PUT or POST /v1/transit/sign/NAME[/sha2-256|/sha2-384|/sha2-512]: input
//     (base64), prehashed, key_version ("0" or "" is the latest); answers
//     signature "vault:v1:<base64>" (ASN.1 DER for ECDSA).
//   - PUT or POST /v1/transit/verify/NAME[/HASH]: input, prehashed,
//     signature; answers valid.
//
// Every request must carry the X-Vault-Token header with the server's token;
// otherwise the answer is 403 {"errors":["permission denied"]}, as Vault
// gives. An unknown key reads as 404 {"errors":[]}, and signing with one is
// 400 "signing key not found". Errors use Vault's {"errors":[...]} body.
package vaulttest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// Server is a fake Vault serving the transit engine at /v1/transit/.
type Server struct {
	*httptest.Server
	token string

	mu    sync.Mutex
	keys  map[string]*key
	signs int
}

type key struct {
	typ     string // Vault's key type: ecdsa-p256, ecdsa-p384, ed25519
	priv    crypto.Signer
	created time.Time
}

// New starts a fake Vault that accepts only token.
func New(token string) *Server {
	s := &Server{token: token, keys: map[string]*key{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// CreateKey makes a transit key of Vault type typ ("ecdsa-p256",
// "ecdsa-p384" or "ed25519") and returns its public key as PEM.
func (s *Server) CreateKey(name, typ string) ([]byte, error) {
	var priv crypto.Signer
	var err error
	switch typ {
	case "ecdsa-p256":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ecdsa-p384":
		priv, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ed25519":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, fmt.Errorf("vaulttest: unsupported key type %q", typ)
	}
	if err != nil {
		return nil, fmt.Errorf("vaulttest: generate %s key: %w", typ, err)
	}
	s.mu.Lock()
	s.keys[name] = &key{typ: typ, priv: priv, created: time.Now().UTC()}
	s.mu.Unlock()
	return cryptoutils.MarshalPublicKeyToPEM(priv.Public())
}

// Signs counts the signatures made, so a test can tell Vault was asked.
func (s *Server) Signs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.signs
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Vault-Token") != s.token {
		vaultError(w, http.StatusForbidden, "permission denied")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/transit/")
	if !ok {
		vaultError(w, http.StatusNotFound, "no handler for route \""+strings.TrimPrefix(r.URL.Path, "/v1/")+"\". route entry not found.")
		return
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 2 && parts[0] == "keys" && r.Method == http.MethodGet:
		s.readKey(w, parts[1])
	case (len(parts) == 2 || len(parts) == 3) && (parts[0] == "sign" || parts[0] == "verify") &&
		(r.Method == http.MethodPut || r.Method == http.MethodPost):
		hashName := "sha2-256" // Vault's default hash_algorithm
		if len(parts) == 3 {
			hashName = parts[2]
		}
		s.signOrVerify(w, r, parts[0], parts[1], hashName)
	default:
		vaultError(w, http.StatusMethodNotAllowed, "unsupported operation")
	}
}

func (s *Server) lookup(name string) *key {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[name]
}

func (s *Server) readKey(w http.ResponseWriter, name string) {
	k := s.lookup(name)
	if k == nil {
		vaultError(w, http.StatusNotFound)
		return
	}
	version := map[string]any{"creation_time": k.created.Format(time.RFC3339Nano), "certificate_chain": ""}
	switch pub := k.priv.Public().(type) {
	case ed25519.PublicKey:
		version["name"] = "ed25519"
		version["public_key"] = base64.StdEncoding.EncodeToString(pub)
	case *ecdsa.PublicKey:
		version["name"] = pub.Curve.Params().Name
		pemKey, err := cryptoutils.MarshalPublicKeyToPEM(pub)
		if err != nil {
			vaultError(w, http.StatusInternalServerError, err.Error())
			return
		}
		version["public_key"] = string(pemKey)
	}
	writeData(w, map[string]any{
		"name":                   name,
		"type":                   k.typ,
		"keys":                   map[string]any{"1": version},
		"latest_version":         1,
		"min_available_version":  0,
		"min_decryption_version": 1,
		"min_encryption_version": 0,
		"deletion_allowed":       false,
		"derived":                false,
		"exportable":             false,
		"supports_signing":       true,
		"supports_encryption":    false,
		"supports_decryption":    false,
		"supports_derivation":    false,
	})
}

type signRequest struct {
	Input      string `json:"input"`
	Prehashed  bool   `json:"prehashed"`
	KeyVersion any    `json:"key_version"`
	Signature  string `json:"signature"`
}

func (s *Server) signOrVerify(w http.ResponseWriter, r *http.Request, op, name, hashName string) {
	var hash crypto.Hash
	switch hashName {
	case "sha2-256":
		hash = crypto.SHA256
	case "sha2-384":
		hash = crypto.SHA384
	case "sha2-512":
		hash = crypto.SHA512
	default:
		vaultError(w, http.StatusBadRequest, "unsupported hash algorithm "+hashName)
		return
	}
	var req signRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		vaultError(w, http.StatusBadRequest, "error parsing JSON")
		return
	}
	if v := fmt.Sprint(req.KeyVersion); req.KeyVersion != nil && v != "" && v != "0" && v != "1" {
		vaultError(w, http.StatusBadRequest, "requested version for signing does not exist")
		return
	}
	k := s.lookup(name)
	if k == nil {
		vaultError(w, http.StatusBadRequest, "signing key not found")
		return
	}
	input, err := base64.StdEncoding.DecodeString(req.Input)
	if err != nil {
		vaultError(w, http.StatusBadRequest, "unable to decode input as base64")
		return
	}
	var digest []byte
	var opts crypto.SignerOpts = hash
	switch pub := k.priv.Public().(type) {
	case ed25519.PublicKey:
		// Vault signs Ed25519 input as is (pure Ed25519) unless prehashed.
		if req.Prehashed {
			vaultError(w, http.StatusBadRequest, "prehashed ed25519 is supported only with sha2-512")
			return
		}
		digest, opts = input, crypto.Hash(0)
		if op == "verify" {
			sig, err := decodeSignature(req.Signature)
			if err != nil {
				vaultError(w, http.StatusBadRequest, err.Error())
				return
			}
			writeData(w, map[string]any{"valid": ed25519.Verify(pub, input, sig)})
			return
		}
	case *ecdsa.PublicKey:
		digest = input
		if !req.Prehashed {
			h := hash.New()
			h.Write(input)
			digest = h.Sum(nil)
		} else if len(input) != hash.Size() {
			vaultError(w, http.StatusBadRequest, "invalid prehashed input length")
			return
		}
		if op == "verify" {
			sig, err := decodeSignature(req.Signature)
			if err != nil {
				vaultError(w, http.StatusBadRequest, err.Error())
				return
			}
			writeData(w, map[string]any{"valid": ecdsa.VerifyASN1(pub, digest, sig)})
			return
		}
	}
	sig, err := k.priv.Sign(rand.Reader, digest, opts)
	if err != nil {
		vaultError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.mu.Lock()
	s.signs++
	s.mu.Unlock()
	writeData(w, map[string]any{
		"signature":   "vault:v1:" + base64.StdEncoding.EncodeToString(sig),
		"key_version": 1,
	})
}

func decodeSignature(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, "vault:v1:")
	if !ok {
		return nil, fmt.Errorf("invalid signature version")
	}
	sig, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("invalid base64 signature value")
	}
	return sig, nil
}

// writeData answers as Vault does: the payload under "data" in a secret.
func writeData(w http.ResponseWriter, data map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"request_id":     "00000000-0000-0000-0000-000000000000",
		"lease_id":       "",
		"renewable":      false,
		"lease_duration": 0,
		"data":           data,
		"wrap_info":      nil,
		"warnings":       nil,
		"auth":           nil,
	})
}

func vaultError(w http.ResponseWriter, code int, msgs ...string) {
	if msgs == nil {
		msgs = []string{}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": msgs})
}
