# planlock hold request. Merging this pull request approves exactly this
# one call (plan digest + tool + arguments), once, until it expires.
hold "h-20261130-0001" {
  plan         = "refund-4711"
  plan_digest  = "sha256:abababababababababababababababababababababababababababababababab"
  step         = "refund"
  tool         = "refund_customer"
  arguments    = "{\"amount\":30,\"currency\":\"EUR\",\"order_id\":\"4711\"}"
  reason       = "pin \"hash\" of get_script_by_path changed"
  observed_pin = "0c1f2e3d4b5a6978"
  created      = "2026-11-30T12:00:00Z"
  expires      = "2026-12-01T12:00:00Z"
}
