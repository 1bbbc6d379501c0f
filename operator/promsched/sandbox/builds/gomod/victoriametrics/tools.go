//go:build tools

// Package tools pins the VictoriaMetrics commands promsched's sandbox builds from this module.
package tools

import (
	_ "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics"
	_ "github.com/VictoriaMetrics/VictoriaMetrics/app/vmalert"
)
