package hclplan

import "strings"

// planlock's own variables: a plan's upstream.env cannot name them and the
// proxy never passes them to an upstream (proxy.UpstreamEnv), whatever the
// plan or the command line says. This is the one list of them.
var (
	// ownSecretPrefixes: every variable planlock reads under its own name,
	// and those of the one KMS provider compiled in (sign: HashiCorp Vault
	// transit through hashivault and vault/api, which also reads OpenBao's
	// BAO_ADDR and BAO_TOKEN).
	ownSecretPrefixes = []string{"PLANLOCK_", "VAULT_", "BAO_"}
	// ownSecretNames: the GitHub token of approvals (gitapprove), the OIDC
	// tokens of keyless signing (sign.IDToken) and cosign's key variables.
	ownSecretNames = []string{
		"GITHUB_TOKEN", "GH_TOKEN",
		"SIGSTORE_ID_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_URL",
		"ACTIONS_RUNTIME_TOKEN", "COSIGN_PASSWORD", "COSIGN_PRIVATE_KEY",
	}
)

// IsOwnSecret reports whether the environment variable name is one of
// planlock's own secrets, which no upstream may receive. Cloud credentials
// (AWS_*, GOOGLE_*, AZURE_*) are not: planlock reads none of them (no cloud
// KMS provider is compiled in), and an upstream may need them.
func IsOwnSecret(name string) bool {
	for _, p := range ownSecretPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	for _, s := range ownSecretNames {
		if name == s {
			return true
		}
	}
	return false
}
