#!/usr/bin/env bash
# e2e/realcluster/client-auth.sh DIR: the API server's client certificate for guardhook (issue 48), as
# docs/operations.md ("Client authentication") tells a platform engineer to make it: a CA, a client
# certificate with CN kube-apiserver signed by it, a kubeconfig whose user is named after guardhook's
# Service (guardhook.guardhook-system.svc), and the AdmissionConfiguration that points both webhook
# plugins at it. Writes them into DIR (kept when already there) and prints the kube-apiserver flag that
# loads them; run.sh passes it through up.sh's RC_APISERVER_FLAGS and install.sh gives guardhook the CA.
set -euo pipefail
DIR=${1:?usage: client-auth.sh DIR}
mkdir -p "$DIR"
cd "$DIR"
if [ ! -s apiserver-guardhook.crt ] || ! openssl verify -CAfile client-ca.crt apiserver-guardhook.crt > /dev/null 2>&1; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
    -subj /CN=guardhook-client-ca -keyout client-ca.key -out client-ca.crt 2> /dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=kube-apiserver \
    -keyout apiserver-guardhook.key -out apiserver-guardhook.csr 2> /dev/null
  openssl x509 -req -in apiserver-guardhook.csr -CA client-ca.crt -CAkey client-ca.key \
    -CAcreateserial -days 365 -extfile <(printf 'extendedKeyUsage=clientAuth') \
    -out apiserver-guardhook.crt 2> /dev/null
  chmod 600 client-ca.key apiserver-guardhook.key
fi
cat > guardhook-kubeconfig.yaml <<YAML
apiVersion: v1
kind: Config
users:
  - name: guardhook.guardhook-system.svc
    user:
      client-certificate: $DIR/apiserver-guardhook.crt
      client-key: $DIR/apiserver-guardhook.key
YAML
cat > admission-configuration.yaml <<YAML
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: ValidatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: $DIR/guardhook-kubeconfig.yaml
  - name: MutatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: $DIR/guardhook-kubeconfig.yaml
YAML
echo "--admission-control-config-file=$DIR/admission-configuration.yaml"
