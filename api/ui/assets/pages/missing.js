// A page that does not exist.

import { fill, el, link } from "../util.js";

export async function render(main, ctx) {
  fill(main, el("h1", { text: "No such page" }),
    el("p", {}, `/ui/${ctx.params[0]} is not a page of the dashboard. Try `, link("/ui/queues", "the queues"), "."));
  return {};
}
