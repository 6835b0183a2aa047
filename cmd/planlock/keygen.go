package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/planlock/planlock/sign"
	"github.com/urfave/cli/v2"
)

func keygenCommand() *cli.Command {
	o := &keygenOptions{}
	return &cli.Command{
		Name:  "keygen",
		Usage: "write a key pair for key-based signing",
		Description: `Writes NAME.key (unencrypted PKCS#8 PEM private key, mode 0600) and NAME.pub
(PEM public key) in --out-dir. Sign with the .key, give the .pub to whoever
verifies. Existing files are never overwritten unless --force.

Examples:
   planlock keygen
   planlock keygen --out-dir ~/.planlock --name release --type ed25519
   planlock sign --key planlock.key plans/refund.hcl
   planlock verify --key planlock.pub plans/refund.hcl
   planlock keygen --state-key ~/.planlock/state.key

With --state-key FILE it writes a state key instead: 32 random bytes (mode
0600) that planlock proxy --state-key uses to authenticate every record of
its state. Keep it outside the state directory and the database.`,
		Flags:  o.flags(),
		Action: action(o, runKeygen),
	}
}

// keygenOptions are the flags of planlock keygen.
type keygenOptions struct {
	cmdline
	OutDir string
	Name   string
	Type   string
	Force  bool
	// StateKey, when set, writes a state key there instead of a key pair.
	StateKey string
}

func (o *keygenOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "out-dir", Value: ".", Usage: "write the keys in `DIR`", TakesFile: true, Destination: &o.OutDir},
		&cli.StringFlag{Name: "name", Value: "planlock", Usage: "base file `NAME` of the keys", Destination: &o.Name},
		&cli.StringFlag{Name: "type", Value: sign.KeyTypes[0], Usage: "key `TYPE`: " + strings.Join(sign.KeyTypes, ", "), Destination: &o.Type},
		&cli.BoolFlag{Name: "force", Usage: "overwrite existing key files", Destination: &o.Force},
		&cli.StringFlag{Name: "state-key", Usage: "write a state key (32 random bytes, mode 0600) to `FILE` instead of a key pair", TakesFile: true, Destination: &o.StateKey},
	}
}

func runKeygen(_ context.Context, o *keygenOptions) error {
	if len(o.Args) > 0 {
		return usageErrorf("keygen: unexpected argument %q", o.Args[0])
	}
	if o.StateKey != "" {
		k, err := writeStateKey(o.StateKey, o.Force)
		if err != nil {
			return err
		}
		fmt.Fprintln(o.IO.out, stateKeyLine(o.StateKey, k))
		return nil
	}
	name := o.Name
	if name == "" || strings.ContainsAny(name, `/\`) {
		return usageErrorf("keygen: --name must be a file name, not a path")
	}
	priv, pub, err := sign.GenerateKeyPair(o.Type)
	if err != nil {
		return usageErrorf("keygen: %v", err)
	}
	dir := o.OutDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return failf("keygen: %v", err)
	}
	keyFile := filepath.Join(dir, name+".key")
	pubFile := filepath.Join(dir, name+".pub")
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if o.Force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	if err := writeKeyFile(keyFile, priv, 0o600, flags); err != nil {
		return err
	}
	if err := writeKeyFile(pubFile, pub, 0o644, flags); err != nil {
		return err
	}
	pk, err := sign.ParsePublicKey(pub)
	if err != nil {
		return failf("keygen: %v", err)
	}
	id, err := sign.KeyID(pk)
	if err != nil {
		return failf("keygen: %v", err)
	}
	fmt.Fprintf(o.IO.out, "private key: %s (keep it secret)\npublic key:  %s\nkey id:      %s\n", keyFile, pubFile, id)
	return nil
}

// writeKeyFile writes data with perm; the mode is forced even when
// overwriting, so a private key never keeps a looser mode.
func writeKeyFile(path string, data []byte, perm os.FileMode, flags int) error {
	f, err := os.OpenFile(path, flags, perm)
	if errors.Is(err, fs.ErrExist) {
		return failf("keygen: %s already exists (use --force to overwrite)", path)
	}
	if err != nil {
		return failf("keygen: %v", err)
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return failf("keygen: %v", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return failf("keygen: %v", err)
	}
	if err := f.Close(); err != nil {
		return failf("keygen: %v", err)
	}
	return nil
}
