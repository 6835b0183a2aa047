package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
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
verifies. Existing files are never overwritten unless --force. Inside a Git
work tree the private key is written only where Git ignores it (asked of
git check-ignore), unless --allow-in-repo: a key in a plans checkout is one
"git add ." away from being published.

Examples:
   planlock keygen --out-dir ~/.config/planlock
   planlock keygen --out-dir ~/.planlock --name release --type ed25519
   planlock sign --key ~/.config/planlock/planlock.key plans/refund.hcl
   planlock verify --key ~/.config/planlock/planlock.pub plans/refund.hcl
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
	// AllowInRepo writes the private key in a Git work tree where Git
	// does not ignore it (with a warning).
	AllowInRepo bool
}

func (o *keygenOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "out-dir", Value: ".", Usage: "write the keys in `DIR`", TakesFile: true, Destination: &o.OutDir},
		&cli.StringFlag{Name: "name", Value: "planlock", Usage: "base file `NAME` of the keys", Destination: &o.Name},
		&cli.StringFlag{Name: "type", Value: sign.KeyTypes[0], Usage: "key `TYPE`: " + strings.Join(sign.KeyTypes, ", "), Destination: &o.Type},
		&cli.BoolFlag{Name: "force", Usage: "overwrite existing key files", Destination: &o.Force},
		&cli.StringFlag{Name: "state-key", Usage: "write a state key (32 random bytes, mode 0600) to `FILE` instead of a key pair", TakesFile: true, Destination: &o.StateKey},
		&cli.BoolFlag{Name: "allow-in-repo", Usage: "write the private key inside a Git work tree even where Git does not ignore it (warns)", Destination: &o.AllowInRepo},
	}
}

// guardSecret refuses to write the secret what at path inside a Git work
// tree where Git does not ignore it (it could be committed), unless
// --allow-in-repo, which warns; elsewhere suggests where to write it.
func (o *keygenOptions) guardSecret(ctx context.Context, what, path, elsewhere string) error {
	top, err := committable(ctx, path)
	switch {
	case err != nil && !o.AllowInRepo:
		return failf("keygen: refusing to write the %s %s inside the Git work tree %s: %v; write it outside the repository (%s) or give --allow-in-repo", what, path, top, err, elsewhere)
	case top != "" && !o.AllowInRepo:
		return failf("keygen: refusing to write the %s %s inside the Git work tree %s, where Git does not ignore it and it could be committed: write it outside the repository (%s), add it to .gitignore, or give --allow-in-repo", what, path, top, elsewhere)
	case top != "":
		fmt.Fprintf(o.IO.err, "planlock: WARNING: the %s %s is inside the Git work tree %s and Git does not ignore it: never commit it\n", what, path, top)
	}
	return nil
}

func runKeygen(ctx context.Context, o *keygenOptions) error {
	if len(o.Args) > 0 {
		return usageErrorf("keygen: unexpected argument %q", o.Args[0])
	}
	if o.StateKey != "" {
		if err := o.guardSecret(ctx, "state key", o.StateKey, "--state-key ~/.planlock/state.key"); err != nil {
			return err
		}
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
	keyFile := filepath.Join(dir, name+".key")
	pubFile := filepath.Join(dir, name+".pub")
	// Before anything is created: a refused key leaves no directory behind.
	if err := o.guardSecret(ctx, "private key", keyFile, "--out-dir ~/.config/planlock"); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return failf("keygen: %v", err)
	}
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

// committable returns the Git work tree holding path when Git does not
// ignore path there (it could be committed), "" when path is outside any
// work tree or ignored. Git itself answers (git check-ignore: .gitignore,
// .git/info/exclude, core.excludesFile, and a tracked file is never
// ignored). When a work tree is there but git cannot answer, it returns
// the tree and why: the caller refuses rather than guess.
func committable(ctx context.Context, path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	// git -C needs a directory that exists; the key's may not yet.
	dir := filepath.Dir(abs)
	for {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	dotGit := ""
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			dotGit = d
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	if _, err := exec.LookPath("git"); err != nil {
		if dotGit == "" {
			return "", nil
		}
		return dotGit, errors.New("git is not installed, so whether Git ignores the key cannot be checked")
	}
	git := func(args ...string) (string, int, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return strings.TrimSpace(string(out)), ee.ExitCode(), errors.New(firstLineOf(stderr.String()))
		}
		return strings.TrimSpace(string(out)), 0, err
	}
	top, _, err := git("rev-parse", "--show-toplevel")
	if err != nil || top == "" {
		if dotGit == "" {
			return "", nil // not in a work tree
		}
		return dotGit, fmt.Errorf("git rev-parse: %v", err)
	}
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		return top, err
	}
	switch _, code, err := git("check-ignore", "-q", "--", rel); {
	case code == 0 && err == nil:
		return "", nil // ignored
	case code == 1:
		return top, nil
	default:
		return top, fmt.Errorf("git check-ignore: %v", err)
	}
}

// firstLineOf is the first non-empty line of s, or "failed".
func firstLineOf(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return "failed"
}
