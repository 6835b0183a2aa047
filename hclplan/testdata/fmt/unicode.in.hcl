plan "ü" {
  goal = "Rückerstattung für Bestellung 4711 — höchstens 30 €"
  step "s" {
    tool = "t"
    arg "名前" { eq = "値" }
    arg "emoji" {max_length=2}
  }
}
