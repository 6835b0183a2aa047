// Package archtest holds the tests that keep the code's layout honest: the
// dependency edges the design promises (the relay does not depend on Git,
// GitHub or sigstore; the durable state does not depend on the plan
// language) and docs/architecture.md naming only packages that exist.
package archtest
