-- SPDX-License-Identifier: Apache-2.0
-- wrk script: POSTs a real 3-alert Alertmanager payload, each request with
-- its own groupKey so that every one is a new notification (not a
-- duplicate) and goes through a full durable commit.
local counter = 0
local thread_id = 0
local body_prefix, body_suffix
local key_prefix = "bench"

-- Splits the payload around the value of "groupKey" (a JSON string that
-- holds escaped quotes).
local function split_at_group_key(body)
  local key = assert(body:find('"groupKey"', 1, true), "payload has no groupKey")
  local open = assert(body:find('"', key + #'"groupKey"', true))
  local i = open + 1
  while true do
    local c = body:sub(i, i)
    assert(c ~= "", "unterminated groupKey")
    if c == "\\" then
      i = i + 2
    elseif c == '"' then
      break
    else
      i = i + 1
    end
  end
  return body:sub(1, open - 1), body:sub(i + 1)
end

function setup(thread)
  thread:set("id", thread_id)
  thread_id = thread_id + 1
end

function init(args)
  local f = assert(io.open(args[1], "rb"))
  body_prefix, body_suffix = split_at_group_key(f:read("*a"))
  f:close()
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  if args[2] and args[2] ~= "" then
    wrk.headers["Authorization"] = "Bearer " .. args[2]
  end
  -- several wrk processes at once (one per replica) keep their keys apart
  if args[3] then
    key_prefix = args[3]
  end
end

function request()
  counter = counter + 1
  local body = body_prefix .. string.format('"%s-%d-%d"', key_prefix, id, counter) .. body_suffix
  return wrk.format(nil, "/webhook", nil, body)
end
