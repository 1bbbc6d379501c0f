//go:build tools

// Package tools pins the command promsched's sandbox builds from this module.
package tools

import _ "sigs.k8s.io/scheduler-plugins/cmd/scheduler"
