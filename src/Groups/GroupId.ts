import { Schema } from "effect"

/**
 * A group id in either form: the interface's `<number>@g.us`, or the Cloud API's opaque id (base64url
 * text such as `Y2FwaV9ncm91cDoxODA1NTU1MDE3MjoxMjAzNjMyMjI3NzE5NjMwNjcZD`, as Graph and the group
 * webhooks give it). An opaque id has a letter: a bare number would name another Graph node (a
 * phone number, a media object) with the instance's token.
 */
export const isGroupId = (id: string) =>
  /^\d{1,40}@g\.us$/.test(id) || (/^[A-Za-z0-9_=-]{8,256}$/.test(id) && /[A-Za-z]/.test(id))

export const GroupId = Schema.String.pipe(
  Schema.filter(isGroupId, {
    message: () => "must be a group id: <number>@g.us, or the Cloud API's group id (letters, digits, - and _)"
  })
).annotations({ examples: ["120363394320896415@g.us", "Y2FwaV9ncm91cDoxODA1NTU1MDE3MjoxMjAzNjMyMjI3NzE5NjMwNjcZD"] })
