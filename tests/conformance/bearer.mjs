// Preloaded into the MCP conformance suite (`node --import`): every HTTP request the suite sends
// carries `Authorization: Bearer $TOOLGUARD_CONFORMANCE_TOKEN`, since the gateway serves
// Streamable HTTP only to callers with a token and the suite has no option to send one. Both
// `fetch` and undici's `request` go through the global dispatcher set here; Host and Origin
// headers stay as the suite sets them (its DNS-rebinding scenario depends on them).
// undici is resolved from the suite's own package (TOOLGUARD_CONFORMANCE_ENTRY, its entry file).
import { createRequire } from "node:module";

const require = createRequire(process.env.TOOLGUARD_CONFORMANCE_ENTRY ?? import.meta.url);
const { Agent, setGlobalDispatcher } = require("undici");

const token = process.env.TOOLGUARD_CONFORMANCE_TOKEN;
if (token) {
  const withToken = (dispatch) => (options, handler) => {
    const headers = options.headers ?? {};
    if (Array.isArray(headers)) {
      options.headers = [...headers, "authorization", `Bearer ${token}`];
    } else if (typeof headers[Symbol.iterator] === "function" && !(headers instanceof Object && headers.constructor === Object)) {
      const copy = {};
      for (const [k, v] of headers) copy[k] = v;
      copy.authorization = `Bearer ${token}`;
      options.headers = copy;
    } else {
      options.headers = { ...headers, authorization: `Bearer ${token}` };
    }
    return dispatch(options, handler);
  };
  setGlobalDispatcher(new Agent().compose(withToken));
}
