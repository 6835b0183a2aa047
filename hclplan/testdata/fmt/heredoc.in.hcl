plan "h" {
goal = <<EOT
  A goal written
    as a heredoc, indentation kept.
EOT
step "s" {
tool = "t"
arg "body" {
eq = <<-EOT
    indented heredoc
    EOT
}
}
}
