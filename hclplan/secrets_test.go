package hclplan

import "testing"

func TestIsOwnSecret(t *testing.T) {
	own := []string{
		// planlock's own
		"PLANLOCK_LISTEN_TOKEN", "PLANLOCK_ANYTHING", "GITHUB_TOKEN", "GH_TOKEN",
		"SIGSTORE_ID_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_URL",
		"ACTIONS_RUNTIME_TOKEN", "COSIGN_PASSWORD", "COSIGN_PRIVATE_KEY",
		// read by the hashivault KMS provider and vault/api
		"VAULT_TOKEN", "VAULT_ADDR", "VAULT_NAMESPACE", "VAULT_CACERT", "VAULT_CLIENT_KEY",
		"VAULT_CLIENT_CERT", "VAULT_SKIP_VERIFY", "VAULT_TRANSIT_SECRET_ENGINE_PATH",
		"VAULT_KEY_PREFIX", "VAULT_AGENT_ADDR", "VAULT_UNWRAP_TOKEN", "BAO_TOKEN", "BAO_ADDR",
	}
	for _, n := range own {
		if !IsOwnSecret(n) {
			t.Errorf("%s is planlock's own secret", n)
		}
	}
	for _, n := range []string{"PATH", "HOME", "WINDMILL_TOKEN", "AWS_ACCESS_KEY_ID", "GOOGLE_APPLICATION_CREDENTIALS",
		"AZURE_CLIENT_SECRET", "GITHUB_TOKENS", "MY_VAULT_TOKEN", "planlock_x", "VAULT"} {
		if IsOwnSecret(n) {
			t.Errorf("%s is not planlock's", n)
		}
	}
}
