//go:build planlockdeps

package deps

import (
	_ "github.com/go-git/go-git/v5"
	_ "github.com/hashicorp/hcl/v2"
	_ "github.com/hashicorp/hcl/v2/hclwrite"
	_ "github.com/mark3labs/mcp-go/client"
	_ "github.com/mark3labs/mcp-go/server"
	_ "github.com/rogpeppe/go-internal/testscript"
	_ "github.com/sigstore/sigstore-go/pkg/sign"
	_ "github.com/sigstore/sigstore-go/pkg/testing/ca"
	_ "github.com/sigstore/sigstore-go/pkg/verify"
	_ "github.com/sigstore/sigstore/pkg/signature"
	_ "github.com/urfave/cli/v2"
	_ "go.etcd.io/bbolt"
)
