#!/bin/sh
# Logs the bot account in once and prints its access token (keep the session: the token is the bot's device).
# Usage: HOMESERVER=https://matrix.example.org BOT_USER=steerbot BOT_PASSWORD=… sh login.sh
set -eu
curl -fsS "$HOMESERVER/_matrix/client/v3/login" \
  -H 'content-type: application/json' \
  -d "{\"type\":\"m.login.password\",\"identifier\":{\"type\":\"m.id.user\",\"user\":\"$BOT_USER\"},\"password\":\"$BOT_PASSWORD\",\"initial_device_display_name\":\"steerbot\"}"
echo
