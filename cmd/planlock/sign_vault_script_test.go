package main

import (
	"os"
	"path/filepath"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/planlock/planlock/internal/testkit/vaulttest"
)

// vaultTestToken is the only token the fake Vault accepts; scripts check it
// never shows in output.
const vaultTestToken = "hvs.planlock-script-secret-token"

// setupVault gives each script a fake Vault (Vault cannot run here;
// vaulttest implements its transit HTTP API faithfully, token checked) with
// the ecdsa-p256 transit key planlock-ci, whose public key is at
// $WORK/vault.pub. VAULT_ADDR and VAULT_TOKEN stay unset: a script opts in
// with
//
//	env VAULT_ADDR=$FAKE_VAULT_ADDR VAULT_TOKEN=$FAKE_VAULT_TOKEN
func setupVault(env *testscript.Env) error {
	v := vaulttest.New(vaultTestToken)
	env.Defer(v.Close)
	pub, err := v.CreateKey("planlock-ci", "ecdsa-p256")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(env.WorkDir, "vault.pub"), pub, 0o644); err != nil {
		return err
	}
	env.Setenv("FAKE_VAULT_ADDR", v.URL)
	env.Setenv("FAKE_VAULT_TOKEN", vaultTestToken)
	return nil
}
