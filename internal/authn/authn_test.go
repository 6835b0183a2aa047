package authn

import (
	"context"
	"testing"
)

func TestMayUse(t *testing.T) {
	cases := []struct {
		plans []string
		plan  string
		want  bool
	}{
		{[]string{"refund"}, "refund", true},
		{[]string{"refund"}, "deploy", false},
		{[]string{"*"}, "deploy", true},
		{nil, "refund", false},
		{[]string{"refund", "deploy"}, "deploy", true},
	}
	for _, c := range cases {
		if got := (Identity{Subject: "token:x", Plans: c.plans}).MayUse(c.plan); got != c.want {
			t.Errorf("%v MayUse(%q) = %v, want %v", c.plans, c.plan, got, c.want)
		}
	}
}

func TestIdentityTravelsInContext(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("empty context has an identity")
	}
	ctx := WithIdentity(context.Background(), Identity{Subject: "jwt:alice"})
	id, ok := FromContext(ctx)
	if !ok || id.Subject != "jwt:alice" {
		t.Fatalf("FromContext = %+v, %v", id, ok)
	}
}
