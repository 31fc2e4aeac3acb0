/**
 * A non-fatal error of one object of a request (interface.md 4.1, "success with non-fatal
 * errors"): the array and index the object came from, what kind of error, and a message. The API
 * answers those it finds while validating; the workers report those they find while applying, on
 * the request (GET /requests/{id}).
 */
export interface ObjectError<Type extends string = string, InputArray extends string = string> {
  type: Type
  input_array: InputArray
  index: number
  message: string
}

/** The object arrays of a /users/track body. */
export type TrackInputArray = 'attributes' | 'events' | 'purchases'
