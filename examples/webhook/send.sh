#!/bin/sh
# Sends one signed message to a steerbot webhook channel, as your system would.
# Usage: SECRET=… URL=http://localhost:8080/webhooks/crm sh send.sh <conversation> <message id> <text>
set -eu
body=$(printf '{"id":"%s","conversation":"%s","sender":{"id":"%s"},"text":"%s"}' "$2" "$1" "$1" "$3")
ts=$(date +%s)
sig=$(printf '%s.%s' "$ts" "$body" | openssl dgst -sha256 -hmac "$SECRET" -hex | sed 's/^.*= //')
curl -fsS "$URL" -H 'content-type: application/json' \
  -H "x-steerbot-timestamp: $ts" -H "x-steerbot-signature: sha256=$sig" \
  --data-binary "$body"
echo
