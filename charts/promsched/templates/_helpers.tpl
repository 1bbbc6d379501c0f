{{/* The chart name, or nameOverride. */}}
{{- define "promsched.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Object names: fullnameOverride, else <release>-<name>, or just <release> when it already contains the name. */}}
{{- define "promsched.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "promsched.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels that select the scheduler's pods: the Deployment, Service, PDB and NetworkPolicy use them.
The component keeps the helm test pod (component "test") out of the Service's endpoints. */}}
{{- define "promsched.selectorLabels" -}}
app.kubernetes.io/name: {{ include "promsched.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: scheduler
{{- end -}}

{{/* Labels on every object of the release; the scheduler's own pods and Service add
app.kubernetes.io/component: scheduler (see promsched.selectorLabels). */}}
{{- define "promsched.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "promsched.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: promsched
{{- end -}}

{{- define "promsched.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "promsched.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image reference: a digest pins it; the tag defaults to the chart's appVersion. No registry serves
a default repository, so there is none: without one the chart renders nothing. */}}
{{- define "promsched.image" -}}
{{- $repository := required "promsched: set image.repository to the registry path you pushed the image to, e.g. --set image.repository=registry.example/promsched (`make image` builds it from the repository's Dockerfile and prints its reference)" .Values.image.repository -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s:%s@%s" $repository $tag .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}
{{- end -}}

{{/* "true" when the replicas elect a leader: always with more than one, so only one of them schedules. */}}
{{- define "promsched.leaderElect" -}}
{{- if or .Values.leaderElection.enabled (gt (int .Values.replicas) 1) -}}
true
{{- end -}}
{{- end -}}

{{- define "promsched.leaseName" -}}
{{- default (include "promsched.fullname" .) .Values.leaderElection.leaseName -}}
{{- end -}}

{{/* The Prometheus hosts policies may use, comma-separated: the allowlist plus the default policy's host,
which the same administrator wrote. */}}
{{- define "promsched.allowedHosts" -}}
{{- $hosts := .Values.prometheus.allowedHosts -}}
{{- if .Values.defaultPolicy.enabled -}}
{{- $hosts = append $hosts (urlParse .Values.defaultPolicy.spec.prometheus.url).hostname -}}
{{- end -}}
{{- $hosts | uniq | join "," -}}
{{- end -}}

{{/* Refuses an allowlist that allows nothing: the operator would hold every policy InvalidPolicy. */}}
{{- define "promsched.checkAllowedHosts" -}}
{{- if not (or .Values.prometheus.allowAnyHost (include "promsched.allowedHosts" .)) -}}
{{- fail "promsched: set prometheus.allowedHosts to the host of the Prometheus your policies query, e.g. --set 'prometheus.allowedHosts={prometheus-operated.monitoring.svc}' for kube-prometheus-stack in namespace monitoring (or enable defaultPolicy, whose host is allowed, or set prometheus.allowAnyHost=true); with no host allowed, the operator refuses every policy (InvalidPolicy)" -}}
{{- end -}}
{{- end -}}

{{/* The job label of the operator's series, which the alerts select: prometheusRule.job, else the one
prometheus-operator gives what the chart's ServiceMonitor scrapes (the Service's name). Refused when
nothing scrapes the operator: PromschedNoLeader, an absent() alert, would fire forever. */}}
{{- define "promsched.metricsJob" -}}
{{- if .Values.prometheusRule.job -}}
{{- .Values.prometheusRule.job -}}
{{- else if .Values.serviceMonitor.enabled -}}
{{- include "promsched.fullname" . -}}
{{- else -}}
{{- fail "promsched: prometheusRule.enabled needs a scrape of the operator: set serviceMonitor.enabled=true, or prometheusRule.job to the job label of whatever scrapes it; unscraped, the critical PromschedNoLeader alert (absent(promsched_leader)) fires forever" -}}
{{- end -}}
{{- end -}}

{{/* The Secrets the operator may read, as JSON {namespace: [names]}: prometheus.secretRefs plus those the
default policy names (in auth and headers). */}}
{{- define "promsched.secretsByNamespace" -}}
{{- $refs := .Values.prometheus.secretRefs -}}
{{- if .Values.defaultPolicy.enabled -}}
{{- $auth := .Values.defaultPolicy.spec.prometheus.auth | default dict -}}
{{- range $field := list "bearerToken" "basicAuth" "ca" -}}
{{- with get $auth $field -}}
{{- $refs = append $refs (dict "namespace" .namespace "name" .name) -}}
{{- end -}}
{{- end -}}
{{- range .Values.defaultPolicy.spec.prometheus.headers | default list -}}
{{- $refs = append $refs (dict "namespace" .valueFrom.namespace "name" .valueFrom.name) -}}
{{- end -}}
{{- end -}}
{{- $byNamespace := dict -}}
{{- range $refs -}}
{{- $names := get $byNamespace .namespace | default list -}}
{{- $_ := set $byNamespace .namespace (append $names .name | uniq | sortAlpha) -}}
{{- end -}}
{{- $byNamespace | toJson -}}
{{- end -}}

{{/* Writes on the pods it schedules: binding, the PodScheduled condition when a pod does not fit, and
events (Scheduled, FailedScheduling). Granted cluster-wide, or per namespace with .Values.namespaces. */}}
{{- define "promsched.schedulingRules" -}}
- apiGroups: [""]
  resources: [pods/binding]
  verbs: [create]
- apiGroups: [""]
  resources: [pods/status]
  verbs: [patch]
# VolumeBinding's PreBind names the chosen node on a claim to provision (selected-node).
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [patch]
# Preemption evicts its victims through the Eviction API, which enforces their PodDisruptionBudgets.
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
# Events as kube-scheduler writes them (events.k8s.io/v1); a repeat patches the first one's series.
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}
